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
    (("dataset=locomo", "dataset.seed=nan"), "dataset.seed must be a whole number", "got nan"),
    (("dataset=qasper", "dataset.sample_size=-3"), "dataset.sample_size must be >= 1", "or null for all"),
    (("dataset=syllabusqa", "dataset.max_decompressed_mb=inf"), "dataset.max_decompressed_mb must be a finite",
     "> 0"),
])
def test_bad_dataset_input_is_one_named_line(tmp_path, overrides, phrase, fix):
    proc = _ragbench(tmp_path, *overrides)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert phrase in out and fix in out, out
    assert "Traceback" not in out and "download custom" not in out, out
    error_lines = [line for line in out.splitlines() if phrase in line]
    assert len(error_lines) == 1, out


def test_num_docs_over_the_dataset_warns_with_the_real_count(tmp_path):
    proc = _ragbench(tmp_path, "dataset=qasper", "dataset.num_docs=50")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "dataset.num_docs=50 but the dataset has only 3 documents; using all 3" in out, out
