"""Real ``python -m ragbench -m ...`` sweeps in a subprocess, checked through the MLflow store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]


def ragbench(args: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "ragbench", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def runs(cwd: Path):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{cwd}/mlruns/mlflow.db")
    exp = client.get_experiment_by_name("ragbench")
    return client, client.search_runs([exp.experiment_id], max_results=1000)


def test_design_card_sweep(tmp_path):
    """The README's main command: 6 child runs under 1 parent, everything logged."""
    proc = ragbench(["-m", "retrieval.topk=3,5,10", "dataset=locomo,qasper", f"cache.dir={tmp_path}/cache"],
                    tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, all_runs = runs(tmp_path)
    parents = [r for r in all_runs if r.data.tags.get("ragbench.role") == "sweep"]
    children = [r for r in all_runs if r.data.tags.get("ragbench.role") == "job"]
    assert len(parents) == 1 and len(children) == 6
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    assert all(c.info.status == "FINISHED" for c in children)
    combos = {(c.data.params["dataset.name"], c.data.params["retrieval.topk"]) for c in children}
    assert combos == {(d, k) for d in ("locomo", "qasper") for k in ("3", "5", "10")}
    index_sha = {}
    for c in children:
        assert len(c.data.tags["ragbench.dataset_sha256"]) == 64
        assert any(k.startswith("by_type/") and k.endswith("/answer/f1") for k in c.data.metrics)
        index_sha.setdefault(c.data.params["dataset.name"], set()).add(c.data.tags["ragbench.index_sha256"])
        names = {a.path for a in client.list_artifacts(c.info.run_id)}
        assert {"cases.jsonl", "cases_table.json", "run.json"} <= names
    assert all(len(shas) == 1 for shas in index_sha.values())  # one index per dataset across top-k
    embedded = [c for c in children if c.data.metrics["ingest/embedded_texts"] > 0]
    assert sorted(c.data.params["dataset.name"] for c in embedded) == ["locomo", "qasper"]  # each corpus once
    assert index_sha["locomo"] != index_sha["qasper"]
    table = json.loads(Path(client.download_artifacts(parent.info.run_id, "sweep_comparison.json")).read_text())
    assert len(table["data"]) == 6
    assert "sweep: 6 jobs" in proc.stdout  # the comparison table is printed at the end


def test_failed_job_does_not_stop_the_sweep(tmp_path):
    (tmp_path / "empty").mkdir()  # a folder without the dataset's files (a missing folder is refused up front)
    proc = ragbench(["-m", f"dataset.path={tmp_path}/empty,null", "dataset=qasper", "dataset.sample_size=2"],
                    tmp_path)
    assert proc.returncode == 1
    assert "1 of 2 jobs failed" in proc.stderr + proc.stdout
    _, all_runs = runs(tmp_path)
    by_role = {}
    for r in all_runs:
        by_role.setdefault(r.data.tags.get("ragbench.role"), []).append(r)
    statuses = sorted(r.info.status for r in by_role["job"])
    assert statuses == ["FAILED", "FINISHED"]
    failed = next(r for r in by_role["job"] if r.info.status == "FAILED")
    assert "qasper-train-v0.3.json': file not found" in failed.data.tags["ragbench.error"]
    assert by_role["sweep"][0].info.status == "FAILED"


def test_unknown_option_lists_valid_ones(tmp_path):
    proc = ragbench(["dataset=nope"], tmp_path, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "ragbench: [RB-CONFIG-001] nope is not an option of dataset (in dataset=nope); options: beir, custom, financebench, "
        "locomo, mlflow, mtrag, multihop_rag, qasper, syllabusqa"]  # one line, before Hydra: not its 14


def test_bad_dataset_file_gives_a_named_error_without_traceback(tmp_path):
    bad = tmp_path / "locomo" / "data"
    bad.mkdir(parents=True)
    (bad / "locomo10.json").write_text('{"not": "a list"}')
    proc = ragbench(["dataset=locomo", f"dataset.path={tmp_path / 'locomo'}"], tmp_path, timeout=120)
    assert proc.returncode == 1
    assert "dataset 'locomo'" in proc.stderr and "locomo10.json" in proc.stderr
    assert "expected a JSON array" in proc.stderr and "fix:" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_ctrl_c_ends_the_run_as_killed(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "ragbench", "dataset=locomo", "embedder.batch_size=8",
                             f"cache.dir={tmp_path}/cold-cache"],  # cold: the model must load and embed
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = ""
    deadline = time.time() + 120
    assert proc.stdout is not None
    while time.time() < deadline:  # wait until the job is embedding, then interrupt it
        line = proc.stdout.readline()
        seen += line
        if "embedder.backend=auto: " in line:  # the model is loaded: encoding starts (10 s at batch 8)
            time.sleep(3)
            break
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)
    assert proc.returncode != 0
    _, all_runs = runs(tmp_path)
    assert [r.info.status for r in all_runs] == ["KILLED"]


def test_retrieval_reranker_depth_grid(tmp_path):
    """The retrieval issue's grid: retrieval x reranker x parent_depth, 27 jobs, one embedding."""
    proc = ragbench(["-m", "retrieval=dense,bm25,hybrid", "reranker=none,mmr,diversity",
                     "expander.parent_depth=0,1,2", "dataset=qasper", f"cache.dir={tmp_path}/cache"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, all_runs = runs(tmp_path)
    children = [r for r in all_runs if r.data.tags.get("ragbench.role") == "job"]
    assert len(children) == 27 and all(c.info.status == "FINISHED" for c in children)
    grid = {(c.data.params["retrieval.retriever._target_"].rsplit(".", 1)[-1],
             tuple(k.split(".")[2] for k in c.data.params if k.startswith("reranker.rerankers.")
                   and k.endswith("._target_")),
             c.data.params["expander.parent_depth"]) for c in children}
    assert len(grid) == 27
    assert sum(c.data.metrics["ingest/embedded_texts"] > 0 for c in children) == 1  # bm25 embeds nothing
    tokens: dict[str, list[float]] = {}
    for c in children:
        tokens.setdefault(c.data.params["expander.parent_depth"], []).append(c.data.metrics["context/tokens"])
    mean = {d: sum(v) / len(v) for d, v in tokens.items()}
    assert mean["0"] < mean["1"] < mean["2"]  # bigger targets, bigger contexts
    # the comparison table labels jobs by what differs, not by the shared dataset/cache overrides
    [parent] = [r for r in all_runs if r.data.tags.get("ragbench.role") == "sweep"]
    table = json.loads(Path(client.download_artifacts(parent.info.run_id, "sweep_comparison.json")).read_text())
    labels = {row[table["columns"].index("job")] for row in table["data"]}
    assert "retrieval=dense reranker=none parent_depth=0 #0" in labels and len(labels) == 27


def test_a_job_that_loads_torch_exits_fast_and_loses_nothing(tmp_path):
    """The fast exit after a job that imported torch keeps the output, the log file and the run."""
    # embedder.backend=torch: the default (auto) runs the ONNX export without importing torch
    proc = ragbench(["dataset=qasper", "dataset.sample_size=2", "cache.mode=off", "embedder.backend=torch"],
                    tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Loading SentenceTransformer model" in proc.stderr  # torch really was loaded
    assert "ragbench job" in proc.stdout and proc.stdout.rstrip().endswith("┘")  # the whole summary
    [logfile] = list((tmp_path / "outputs").rglob("*.log"))
    assert "judge: 2/2" in logfile.read_text()  # the file handler was flushed (the last wave's last line)
    _, all_runs = runs(tmp_path)
    assert [r.info.status for r in all_runs] == ["FINISHED"]
