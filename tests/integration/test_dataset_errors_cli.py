"""``python -m ragbench`` on bad dataset input: one line naming the fix, no traceback, exit 1; an
oversized sample runs with a warning that gives the real count."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _ragbench(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    store = tmp_path / "mlruns"
    args = [sys.executable, "-m", "ragbench", *overrides, "retrieval=bm25", f"cache.dir={tmp_path / 'cache'}",
            f"tracking.uri=sqlite:///{store}/mlflow.db", f"tracking.artifact_root={store}/artifacts",
            f"hydra.run.dir={tmp_path / 'run'}"]
    return subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, env=dict(os.environ), timeout=300)


@pytest.mark.parametrize(("overrides", "phrase", "fix"), [
    (("dataset=custom", "dataset.path=/nonexistent/kb"), "dataset.path does not exist", "create that folder"),
    # a path is checked before the store opens, in a sweep too: no FAILED run, no mlruns/ (issue 27 item 9)
    (("-m", "dataset=custom", "dataset.path=/nonexistent/kb,/tmp"), "dataset.path does not exist",
     "create that folder"),
    (("dataset=locomo", "dataset.path=/nonexistent/locomo"), "dataset.path does not exist",
     "python -m ragbench.datasets download locomo"),
    # the command-line check (ragbench.config_check) answers these before the adapter is built
    (("dataset=locomo", "dataset.seed=nan"), "dataset.seed=nan is not valid", "use an integer >= 0"),
    (("dataset=qasper", "dataset.sample_size=-3"), "dataset.sample_size=-3 is not valid", "use an integer >= 1 or null"),
    (("dataset=syllabusqa", "dataset.max_decompressed_mb=inf"), "dataset.max_decompressed_mb=inf is not valid",
     "use a finite number > 0 (default: dataset.max_decompressed_mb=200)"),
])
def test_bad_dataset_input_is_one_named_line(tmp_path, overrides, phrase, fix):
    proc = _ragbench(tmp_path, *overrides)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert phrase in out and fix in out, out
    assert "Traceback" not in out and "download custom" not in out, out
    error_lines = [line for line in out.splitlines() if phrase in line]
    assert len(error_lines) == 1, out
    assert not (tmp_path / "mlruns").exists(), out  # found before any store or run exists


def test_num_docs_over_the_dataset_warns_with_the_real_count(tmp_path):
    proc = _ragbench(tmp_path, "dataset=qasper", "dataset.num_docs=50")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "dataset.num_docs=50 but the dataset has only 3 documents; using all 3" in out, out


def test_dataset_counters_reach_mlflow(tmp_path):
    """Counted handlings are logged as dataset/* metrics of the job (the existing dataset-stats path)."""
    import json

    from tests.fixtures.jobs import run_job

    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "ferry.md").write_text("# Ferry\n\nThe ferry leaves the north pier at 7:15.\n", encoding="utf-8")
    rows = [{"id": "a", "question": "When does the ferry leave?", "answers": ["7:15"]},
            {"id": "b", "question": "  ", "answers": ["never"]}]
    (kb / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run, _ = run_job(["dataset=custom", f"dataset.path={kb}", "retrieval=bm25",
                      f"cache.dir={tmp_path / 'cache'}"], tmp_path)
    metrics = run.data.metrics
    assert metrics["dataset/qa_dropped_empty_question"] == 1.0
    assert metrics["dataset/qa_dropped_no_gold"] == 0.0
