"""Tests moved out of the unit suite because they spawn a process or open a real MLflow store, and the
check that the unit suite itself imports no torch, sentence-transformers or litellm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ragbench.cache import cli
from ragbench.cache.store import StageCache
from ragbench.tracking.mlflow_tracker import MlflowTracker
from ragbench.tracking.owner import _start_time, owner, owner_gone

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "sentence_transformers", "litellm")
# run at the end of the unit session inside the subprocess: which heavy modules did it import?
PLUGIN = """
import json, os, sys
def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["HEAVY_REPORT"], "w") as f:
        json.dump(sorted(m for m in {heavy} if m in sys.modules), f)
"""


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def test_the_unit_suite_imports_no_torch_sentence_transformers_or_litellm(tmp_path):
    (tmp_path / "heavy_report_plugin.py").write_text(PLUGIN.format(heavy=HEAVY))
    report = tmp_path / "heavy.json"
    env = _env(HEAVY_REPORT=str(report))
    env["PYTHONPATH"] = os.pathsep.join((str(tmp_path), env["PYTHONPATH"]))
    proc = subprocess.run([sys.executable, "-m", "pytest", "tests/unit", "-q", "-x", "-p", "no:cacheprovider",
                           "-p", "heavy_report_plugin"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert json.loads(report.read_text()) == []


def test_cache_module_entry_point(tmp_path):
    root = tmp_path / "cache"
    StageCache(dir=str(root)).put_record("verdicts", "e" * 64, {"j": 1}, {"f1": 1.0})
    proc = subprocess.run([sys.executable, "-m", "ragbench.cache", "info"], check=False, capture_output=True,
                          env=_env(**{cli.ENV_VAR: str(root)}), text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "verdicts" in proc.stdout and str(root) in proc.stdout.replace("\n", "")


def test_owner_liveness():
    assert owner_gone(owner()) is False
    assert owner_gone(None) is None and owner_gone("another-host:1:1") is None
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    tag = f"{owner().split(':')[0]}:{proc.pid}:{_start_time(proc.pid)}"
    assert owner_gone(tag) is False
    proc.kill()
    proc.wait()
    assert owner_gone(tag) is True
    assert os.getpid() != proc.pid


def test_batched_metrics_reach_the_store(tmp_path):
    tracker = MlflowTracker(uri=f"sqlite:///{tmp_path}/db/mlflow.db", artifact_root=str(tmp_path / "art"),
                            experiment="t")
    run_id = tracker.start_run(run_name="r", tags={"x": "1"})
    metrics = {f"m/{i}": float(i) for i in range(2500)}  # several log_batch calls
    tracker.log_metrics(run_id, metrics)
    tracker.log_params(run_id, {f"p.{i}": i for i in range(250)})
    tracker.log_files(run_id, {"a/b.txt": "hello"})
    tracker.end_run(run_id, "FINISHED")
    run = tracker.client.get_run(run_id)
    assert run.data.metrics == metrics and len(run.data.params) == 250
    assert run.info.status == "FINISHED"
    assert [a.path for a in tracker.client.list_artifacts(run_id, "a")] == ["a/b.txt"]
