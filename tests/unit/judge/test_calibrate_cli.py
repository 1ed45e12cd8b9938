"""``python -m ragbench.judge calibrate`` called in-process: --help, a bad option and a label off the scale
end in usage or one line with their exit code, before any judge is built or any store is opened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragbench.judge.__main__ import main

GOOD = {"question": "Q?", "answer": "A.", "contexts": ["p1"], "labels": {"faithfulness": 1}}


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ragbench.offline.set_defaults", lambda: None)  # keeps this process's environment


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_after_calibrate_prints_the_usage(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", flag]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: python -m ragbench.judge calibrate LABELS.jsonl") and err == ""
    assert max(len(line) for line in out.splitlines()) <= 80


def test_an_unknown_option_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "labels.jsonl", "--bogus"]) == 2
    assert capsys.readouterr().err == "ragbench.judge: unknown option '--bogus'; fix: see calibrate --help\n"


@pytest.mark.parametrize(("label", "overrides", "allowed"), [
    (5, [], "scale=binary allows 0 or 1"),
    (-1, ["scale=binary"], "scale=binary allows 0 or 1"),
    (4, ["scale=rubric", "max_score=3"], "scale=rubric allows 0 to 3"),
])
def test_a_label_off_the_scale_is_a_usage_error_naming_file_and_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], label: int, overrides: list[str],
        allowed: str) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "labels": {"faithfulness": label}}) + "\n",
                    encoding="utf-8")
    assert main(["calibrate", str(path), *overrides, f"cache.dir={tmp_path / 'cache'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ragbench.judge: [RB-JUDGE-001] labels file {path}, line 2: labels.faithfulness is {label}, but "
                          f"{allowed}; fix: correct the label")
    assert err.count("\n") == 1 and not (tmp_path / "cache").exists()
