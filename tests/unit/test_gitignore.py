"""What the README's commands write in the repository is git-ignored: a first hour leaves `git status`
clean."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _ignored(path: str) -> bool:
    """``path`` (relative to the repository root) matched by a root-anchored or plain .gitignore pattern."""
    lines = (REPO / ".gitignore").read_text().splitlines()
    patterns = [p.strip() for p in lines if p.strip() and p[0] != "#"]
    parts = path.split("/")
    for pat in patterns:
        anchored, folder = pat.startswith("/"), pat.endswith("/")
        core = pat.strip("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        candidates = prefixes[:-1] if folder else prefixes
        if any(fnmatch.fnmatchcase(c if anchored else c.rsplit("/", 1)[-1], core) for c in candidates):
            return True
    return False


def test_the_readme_commands_outputs_are_ignored():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    report = re.search(r"--report (\S+)/ --csv (\S+)", readme)
    generated = re.search(r"datasets generate .*? out=(\S+)", readme)
    assert report and generated
    assert _ignored(f"{report[1]}/report.html") and _ignored(report[2])
    assert _ignored(generated[1]) and _ignored("eval.train.json") and _ignored("eval.test.json")
    assert _ignored("mlruns/mlflow.db") and _ignored("multirun/2024-01-01/0/x")
    assert not _ignored("examples/docs/ferry.md") and not _ignored("docs/out.md")
