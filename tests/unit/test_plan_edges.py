"""``plan=true`` at its edges, in process: a key in the config is the job path's one-line ConfigError (not
the TypeError of a component that has no such parameter), and a ``plan.json`` that cannot be written is one
line naming it and the fix, exit 1, after the plan is printed (issue 27 item 6)."""

from __future__ import annotations

import json

import pytest

from ragbench.plan.cli import main as plan

FAST = ["retrieval=bm25", "dataset=qasper", "dataset.max_queries=2"]


@pytest.mark.parametrize(("args", "phrase", "fix"), [
    (["+llm.api_key=sk-not-a-real-key-123456"], "llm.api_key puts a secret in the config (not shown)",
     "fix: drop llm.api_key, export the key"),
    (["llm=openai", "+judge.api_key=sk-not-a-real-key-123456"], "judge.api_key puts a secret in the config",
     "fix: drop judge.api_key"),
], ids=["llm-api-key", "judge-api-key"])
def test_a_key_in_the_config_is_the_jobs_config_error(tmp_path, capsys, args, phrase, fix):
    assert plan([*FAST, f"cache.dir={tmp_path}", *args], None) == 1
    err = capsys.readouterr().err
    assert err.startswith("ragbench plan: ") and phrase in err and fix in err, err
    assert "TypeError" not in err and "sk-not-a-real-key-123456" not in err and "Traceback" not in err


def _under_a_file(tmp_path):
    (tmp_path / "afile").write_text("")
    return f"{tmp_path}/afile/plan.json"


@pytest.mark.parametrize(("where", "reason"), [
    (_under_a_file, "afile is a file, not a folder"),
    (lambda tmp: "/proc/ragbench-plan.json", "No such file or directory"),
    (lambda tmp: str(tmp), "Is a directory"),
], ids=["under-a-file", "in-proc", "a-folder"])
def test_an_unwritable_plan_json_is_one_line(tmp_path, capsys, where, reason):
    path = where(tmp_path)
    assert plan([*FAST, f"cache.dir={tmp_path}/cache"], path) == 1
    out = capsys.readouterr()
    assert "plan: 1 jobs" in out.out  # the plan itself is printed first
    assert out.err.count("\n") == 1 and "Traceback" not in out.err
    assert out.err.startswith(f"ragbench plan: cannot write plan.json={path} (") and reason in out.err
    assert "fix: name a file in a writable folder" in out.err


def test_plan_json_in_a_new_folder_is_written(tmp_path, capsys):
    assert plan([*FAST, f"cache.dir={tmp_path}/cache"], f"{tmp_path}/out/plan.json") == 0
    assert json.loads((tmp_path / "out/plan.json").read_text())["jobs"] == 1
