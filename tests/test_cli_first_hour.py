"""What a new user sees from ``python -m ragbench`` off a terminal: one-line config errors before MLflow
starts, a help titled ragbench, and a sweep log with job n/N lines and no tqdm or DEBUG noise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]


def ragbench(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "ragbench", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize(("args", "message"), [
    (["retrieval.topkk=3"], "retrieval.topkk is not a config key of retrieval=dense; did you mean retrieval.topk?"),
    (["-m", "retrieval.topkk=3,5"], "did you mean retrieval.topk?"),
    (["+retrieval.topkk=3"], "retrieval.topkk is not a setting of the retrieval group; did you mean retrieval.topk?"),
    (["retrieval.topk=0"], "retrieval.topk=0 is not valid: use an integer >= 1"),
    (["retrieval.topk=abc"], "retrieval.topk='abc' is not valid: use an integer >= 1"),
    (["llm=openai", "llm.timeout=inf"], "llm.timeout=inf is not valid: use a finite number > 0"),
    (["-m", "dataset=locomo,qasprr"], "qasprr is not an option of dataset (in dataset=locomo,qasprr); "
                                      "did you mean dataset=qasper?"),
    (["-m", "retrieval=dense,bm52"], "bm52 is not an option of retrieval (in retrieval=dense,bm52); "
                                     "did you mean retrieval=bm25?"),
])
def test_config_error_is_one_line_exit_1_and_no_mlflow_run(tmp_path, args, message):
    proc = ragbench(args, tmp_path)
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and "HYDRA_FULL_ERROR" not in proc.stderr
    assert not (tmp_path / "mlruns").exists()  # checked before MLflow starts: no FAILED run left behind


def test_help_is_titled_ragbench(tmp_path):
    proc = ragbench(["--help"], tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.startswith("ragbench: ") and "__main__" not in proc.stdout


def test_sweep_log_off_a_terminal(tmp_path):
    # hybrid: a model load, an embedding pass (its own cache) and a bm25s index, each of which used to print
    proc = ragbench(["-m", "dataset=qasper", "dataset.sample_size=3", "retrieval=hybrid", "retrieval.topk=3,5",
                     "reranker=[diversity]", f"cache.dir={tmp_path / 'cache'}"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    err = proc.stderr
    assert "job 1/2: " in err and "job 2/2: " in err
    assert "\r" not in err and "DEBUG" not in err
    # the last line of each of a job's waves (expand, generate, judge), and one per 30 s on a slow machine:
    # not a line per 10% of a wave
    for wave in ("expand", "generate", "judge"):
        assert err.count(f"{wave}: 3/3") == 2 and err.count(f"{wave}: ") < 6, wave
    # the table: ranked within the dataset, the job's own top-k under one column, brackets kept
    assert "best answer/f1 first within each dataset" in proc.stdout
    assert "hit@k" in proc.stdout and "reranker=[diversity]" in proc.stdout
