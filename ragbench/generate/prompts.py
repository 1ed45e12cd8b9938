"""Prompt files (conf/prompt/<kind>/<name>.yaml): loading, validation, hashing, and the answer prompt.

Contexts are wrapped as ``<reference id="ref_N" title=...>`` blocks whose text cannot open or close a
tag (``<`` and ``>`` are escaped), and the system prompt tells the model to treat them as untrusted
data. Templates are ``string.Template`` strings, so literal braces (JSON examples) need no escaping.
"""

from __future__ import annotations

import hashlib
import json
import logging
import string
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragbench.errors import ConfigError
from ragbench.text import norm_key
from ragbench.types import Context, Query

log = logging.getLogger(__name__)

PROMPT_ROOT = Path(__file__).resolve().parent.parent / "conf" / "prompt"


def resolve_prompt_file(spec: str, *, kind: str) -> Path:
    """The file ``spec`` names: a path to a YAML file, or a stem under ``conf/prompt/<kind>/``."""
    candidate = Path(spec).expanduser()
    if candidate.suffix in (".yaml", ".yml") or "/" in spec or "\\" in spec:
        if candidate.is_file():
            return candidate
        raise ConfigError(
            f"prompt file {candidate} (from '{spec}') does not exist\n  fix: give an existing "
            f"YAML file or one of {available(kind)}"
        )
    path = PROMPT_ROOT / kind / f"{spec}.yaml"
    if not path.is_file():
        raise ConfigError(
            f"no {kind} prompt named '{spec}' in {PROMPT_ROOT / kind}\n  fix: choose one of "
            f"{available(kind)} or give a path to your own YAML file"
        )
    return path


def available(kind: str) -> list[str]:
    """Names of the prompt files shipped for ``kind`` (answer, judge)."""
    return sorted(p.stem for p in (PROMPT_ROOT / kind).glob("*.yaml"))


def read_prompt_file(path: Path) -> tuple[dict[str, Any], str]:
    """(mapping, content hash) of a prompt YAML file; the hash ignores comments and formatting."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"prompt file {path} cannot be read: {exc}\n  fix: make it valid UTF-8 YAML"
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"prompt file {path}: the top level must be a mapping, got {type(data).__name__}")
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return data, hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def require_str(data: Mapping[str, Any], key: str, path: Path) -> str:
    """``data[key]`` as a string, or a ConfigError naming the file and the key."""
    value = data.get(key)
    if not isinstance(value, str):
        raise ConfigError(
            f"prompt file {path}: key '{key}' must be a string, got {type(value).__name__}"
            f"\n  fix: add '{key}: ...' to the file"
        )
    return value


def check_template(text: str, allowed: Collection[str], *, where: str) -> string.Template:
    """A compiled template whose variables are all in ``allowed`` (else a ConfigError saying which)."""
    template = string.Template(text)
    try:
        template.substitute({name: "" for name in allowed})
    except KeyError as exc:
        raise ConfigError(
            f"{where}: unknown variable ${exc.args[0]}; allowed: "
            f"{', '.join('$' + a for a in sorted(allowed))}"
        ) from exc
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}\n  fix: write $$ for a literal dollar sign") from exc
    return template


def literal(text: str, *, where: str) -> str:
    """A template without variables, with ``$$`` turned into ``$``."""
    return check_template(text, (), where=where).substitute({})


def escape_reference(text: str, *, attribute: bool = False) -> str:
    """Escape ``<`` and ``>`` so quoted text cannot end its ``<reference>`` block (``"`` too in titles)."""
    out = text.replace("<", "&lt;").replace(">", "&gt;")
    return out.replace('"', "&quot;") if attribute else out


def render_references(contexts: Sequence[Context], template: string.Template, empty: str) -> str:
    """The contexts as numbered, escaped reference blocks (``ref_1`` is the first context)."""
    if not contexts:
        return empty
    blocks = [
        template.substitute(
            n=i, title=escape_reference(c.title or "", attribute=True), text=escape_reference(c.text)
        )
        for i, c in enumerate(contexts, start=1)
    ]
    return "\n".join(blocks)


@dataclass(frozen=True)
class AnswerPrompt:
    """A loaded answer prompt file: builds the chat messages for one query and its contexts."""

    name: str
    path: str
    sha256: str
    system: str
    user: string.Template
    reference: string.Template
    missing_rule: str
    no_references: str
    instructions: Mapping[str, Mapping[str, str]]
    never_reveal: frozenset[str]

    @property
    def hash(self) -> str:
        """Short content hash for params (``llm/prompt_hash``)."""
        return self.sha256[:16]

    def instruction(self, dataset: str | None, question_type: str | None) -> str:
        """The most specific instruction for (dataset, question type), by the documented fallback order."""
        ds, qt = norm_key(dataset), norm_key(question_type)
        if qt in self.never_reveal:
            qt = ""
        for d, q in ((ds, qt), (ds, "default"), ("default", qt), ("default", "default")):
            text = self.instructions.get(d, {}).get(q) if d and q else None
            if text:
                return text
        return ""

    def messages(
        self, query: Query, contexts: Sequence[Context], *, dataset: str | None
    ) -> list[dict[str, str]]:
        """System + user messages for one query (contexts numbered from ref_1)."""
        user = self.user.substitute(
            references=render_references(contexts, self.reference, self.no_references),
            instruction=self.instruction(dataset, query.question_type),
            missing_rule=self.missing_rule,
            question=query.text,
        )
        history: list[dict[str, str]] = []  # a conversation's earlier turns (ragbench.generate.history)
        for turn in query.history:
            history.append({"role": "user", "content": turn.text})
            if turn.answer:
                history.append({"role": "assistant", "content": turn.answer})
        return [{"role": "system", "content": self.system}, *history, {"role": "user", "content": user}]


def load_answer_prompt(spec: str) -> AnswerPrompt:
    """Load and validate an answer prompt file (a stem under conf/prompt/answer/ or a path)."""
    path = resolve_prompt_file(spec, kind="answer")
    data, sha = read_prompt_file(path)
    raw = data.get("instructions") or {}
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ConfigError(f"prompt file {path}: 'instructions' must map dataset -> question type -> text")
    instructions = {
        norm_key(ds): {
            norm_key(qt): literal(str(text), where=f"prompt file {path}, instructions.{ds}.{qt}")
            for qt, text in types.items()
        }
        for ds, types in raw.items()
    }
    return AnswerPrompt(
        name=path.stem,
        path=str(path),
        sha256=sha,
        system=literal(require_str(data, "system", path), where=f"prompt file {path}, key 'system'"),
        user=check_template(
            require_str(data, "user", path),
            ("references", "instruction", "missing_rule", "question"),
            where=f"prompt file {path}, key 'user'",
        ),
        reference=check_template(
            require_str(data, "reference", path),
            ("n", "title", "text"),
            where=f"prompt file {path}, key 'reference'",
        ),
        missing_rule=literal(
            require_str(data, "missing_rule", path), where=f"prompt file {path}, key 'missing_rule'"
        ),
        no_references=str(data.get("no_references") or "(no reference passages were retrieved)"),
        instructions=instructions,
        never_reveal=frozenset(norm_key(t) for t in data.get("never_reveal") or ()),
    )
