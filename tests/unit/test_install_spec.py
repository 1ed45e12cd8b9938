"""The install the README promises: a torch range (not a pin) that this machine's CPU wheel meets, a dev
extra without Ray, and the two README commands that CI runs, readable from the README."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _extra(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
    """Package names an extra pulls in, following ``ragbench[...]`` self-references."""
    out: set[str] = set()
    for line in PROJECT["project"]["optional-dependencies"][name]:
        req = Requirement(line)
        if req.name == "ragbench":
            for sub in req.extras - seen:
                out |= _extra(sub, seen | {name})
        else:
            out.add(req.name.lower())
    return out


def test_torch_is_a_range_that_the_local_cpu_wheel_and_older_torches_meet():
    (torch,) = [Requirement(d) for d in PROJECT["project"]["dependencies"] if d.startswith("torch")]
    assert not any(s.operator == "==" for s in torch.specifier)
    assert Version("2.13.0+cpu") in torch.specifier and Version("2.5.1") in torch.specifier
    assert PROJECT["tool"]["uv"]["pip"]["torch-backend"] == "auto"


def test_dev_extra_is_lean_and_ray_has_its_own():
    dev = _extra("dev")
    assert {"pytest", "ruff", "optuna"} <= dev
    assert not any(name.startswith("ray") or "ray" in name.split("-") for name in dev)
    assert "ray[default]" in " ".join(PROJECT["project"]["optional-dependencies"]["ray"])


def test_readme_holds_the_three_commands_ci_runs():
    spec = importlib.util.spec_from_file_location("readme_commands", REPO / ".ci" / "readme_commands.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = module.commands((REPO / "README.md").read_text(encoding="utf-8"))
    assert found == {"install": "pip install -e '.[dev]' && python -m ragbench.embed prepare", "quick": 'python -m pytest -q -m "not slow" tests/unit',
                     "test": "python -m pytest -q -n auto --dist loadfile"}
    ci = (REPO / ".ci" / "run").read_text()
    assert "readme_commands.py install" in ci and "readme_commands.py test" in ci and "python -m venv" in ci
    # the quick test runs in the venv the README's install makes, before CI adds any extra
    assert ci.index("readme_commands.py install") < ci.index("readme_commands.py quick") < ci.index("pip install")


def test_venvs_are_git_ignored():
    ignored = (REPO / ".gitignore").read_text().splitlines()
    assert ".venv/" in ignored and "venv/" in ignored


def test_openai_compatible_example_exports_the_key():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("## Using an LLM"):]
    assert re.search(r"export OPENAI_API_KEY=\S+.*\n.*llm=openai_compatible", block)
