"""Every RagbenchError class has its own stable code (``ragbench.errors.CODES``), each code is listed in
docs/failures.md, and the docs list no code that no class has. The code reaches the printed line
(``[RB-CONFIG-001] message``) and the ``ragbench.error`` tag (``[RB-CONFIG-001] ConfigError: message``)."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import sys
from pathlib import Path

import pytest

import ragbench
from ragbench.errors import CODES, RETIRED, ConfigError, RagbenchError, code_of, coded, described

DOCS = Path(__file__).resolve().parents[2] / "docs" / "failures.md"
CODE = re.compile(r"RB-[A-Z]+-\d{3}")
HEAVY = ("torch", "sentence_transformers", "litellm")


def _subclasses(cls: type) -> set[type]:
    out = {cls}
    for sub in cls.__subclasses__():
        out |= _subclasses(sub)
    return out


@pytest.fixture(scope="module")
def error_classes() -> dict[str, type]:
    """Every RagbenchError class ragbench defines, by ``module.QualifiedName``: every module of the package
    imported (none imports torch, sentence_transformers or litellm at its top level), the environment
    left as it was (``ragbench.__main__`` sets offline defaults when imported)."""
    env, heavy = dict(os.environ), {m for m in HEAVY if m in sys.modules}
    try:
        for info in pkgutil.walk_packages(ragbench.__path__, "ragbench."):
            importlib.import_module(info.name)
    finally:
        os.environ.clear()
        os.environ.update(env)
    assert {m for m in HEAVY if m in sys.modules} <= heavy
    return {f"{c.__module__}.{c.__qualname__}": c for c in _subclasses(RagbenchError)
            if c.__module__.split(".")[0] == "ragbench"}


def _documented() -> dict[str, str]:
    """Code -> its row in docs/failures.md's table of error codes."""
    rows: dict[str, str] = {}
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        found = CODE.findall(line) if line.startswith("|") else []
        if found:
            assert len(found) == 1 and line.startswith(f"| `{found[0]}` |"), f"one code per row, first: {line}"
            assert found[0] not in rows, f"{found[0]} listed twice in {DOCS.name}"
            rows[found[0]] = line
    return rows


def test_every_error_class_has_its_own_code(error_classes):
    missing = sorted(set(error_classes) - set(CODES))
    assert not missing, f"no code in ragbench.errors.CODES for {missing}; fix: give each a new code (never reuse one)"
    stale = sorted(set(CODES) - set(error_classes))
    assert not stale, f"CODES names classes that do not exist: {stale}; fix: move their codes to RETIRED"
    assert len(set(CODES.values())) == len(CODES), "two classes share a code"
    assert not set(CODES.values()) & RETIRED, "a retired code was given again"
    assert all(CODE.fullmatch(code) for code in CODES.values())
    for name, cls in error_classes.items():
        assert code_of(cls) == CODES[name]


def test_every_code_is_documented_with_its_class_and_the_docs_list_no_other(error_classes):
    rows = _documented()
    assert sorted(set(CODES.values()) - set(rows)) == [], f"codes missing from {DOCS.name}"
    assert sorted(set(rows) - set(CODES.values())) == [], f"{DOCS.name} lists codes no class has"
    for name, code in CODES.items():
        assert f"`{error_classes[name].__name__}`" in rows[code], f"{code}'s row does not name {name}"
        assert rows[code].count("|") >= 5, f"{code}'s row needs its class, meaning and usual fix"


def test_a_subclass_without_its_own_entry_has_its_nearest_ancestors_code():
    class PluginConfigError(ConfigError):  # a class defined outside ragbench (a plugin, a test)
        pass

    assert code_of(PluginConfigError("x")) == code_of(ConfigError) == "RB-CONFIG-001"
    assert code_of(ValueError("x")) is None


def test_the_printed_line_and_the_error_tag_carry_the_code():
    from ragbench.llm.errors import LLMReplyTooLargeError

    err = LLMReplyTooLargeError("reply of 50000 characters; fix: lower llm.max_tokens")
    assert coded(err) == "[RB-LLM-009] reply of 50000 characters; fix: lower llm.max_tokens"
    assert described(err) == "[RB-LLM-009] LLMReplyTooLargeError: reply of 50000 characters; fix: lower llm.max_tokens"
    assert coded(OSError("disk")) == "disk" and described(OSError("disk")) == "OSError: disk"
