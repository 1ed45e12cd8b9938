"""Issue 38.1 on real sweeps (``python -m ragbench -m`` in a subprocess, fast bm25 jobs on the bundled
Qasper sample): the sweep table, ``sweep_comparison.json`` and ``runs.csv`` read each job's record.
Untampered, they hold exactly the numbers MLflow's params and metrics hold (what they read before); a record
edited in the artifact store changes them in the next sweep (its jobs resumed from those records); a
truncated record is not resumed from: one line names it and the job runs again."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

from ragbench.tracking.runs_table import KEY_METRICS, baseline_kind, csv_text

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _sweep(tmp_path: Path) -> subprocess.CompletedProcess:
    args = ["-m", "retrieval=bm25", "dataset=qasper", "dataset.sample_size=2", "retrieval.topk=3,5",
            f"cache.dir={tmp_path}/cache"]
    return subprocess.run([sys.executable, "-m", "ragbench", *args], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=900)


def _store(tmp_path: Path):
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    exp = client.get_experiment_by_name("ragbench")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"], max_results=100)
    return client, runs


def _artifact(client, run_id: str, name: str) -> str:
    return (Path(urlparse(client.get_run(run_id).info.artifact_uri).path) / name).read_text(encoding="utf-8")


def _last_sweep(client, runs):
    parent = [r for r in runs if r.data.tags.get("ragbench.role") == "sweep"][-1]
    kids = sorted((r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id),
                  key=lambda r: r.info.start_time)
    return parent, kids


def test_sweep_readers_read_the_record(tmp_path):
    first = _sweep(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    client, runs = _store(tmp_path)
    parent, kids = _last_sweep(client, runs)
    # untampered: runs.csv is the one MLflow's params and metrics give (the reader before the record), and the
    # table's numbers are MLflow's
    before = [{"run_id": r.info.run_id, "run_name": r.info.run_name, "status": r.info.status,
               "baseline": baseline_kind(r.data.tags), "params": dict(r.data.params),
               "metrics": dict(r.data.metrics)} for r in kids]
    assert _artifact(client, parent.info.run_id, "runs.csv") == csv_text(before, ["retrieval.topk"])
    table = json.loads(_artifact(client, parent.info.run_id, "summary/sweep_comparison.json"))
    shown = [k for k in KEY_METRICS if k in table[0]]
    assert shown
    by_id = {r.info.run_id: r for r in kids}
    for row in table:
        assert {k: row[k] for k in shown if k in row} == {k: by_id[row["run_id"]].data.metrics[k]
                                                           for k in shown if k in row}
    from ragbench.compare.cli import run as compare

    out = tmp_path / "compare.csv"  # compare --csv: the same rows, from the same records
    assert compare(["--tracking-uri", f"sqlite:///{tmp_path}/mlruns/mlflow.db", "--sweep", parent.info.run_id,
                    "--resamples", "100", "--csv", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == csv_text(before, ["retrieval.topk"])

    # an edited record (topk=5's): the next sweep resumes both jobs and shows the edit
    metric = shown[0]
    forged, other = (r for r in sorted(kids, key=lambda r: r.data.params["retrieval.topk"] != "5"))
    path = Path(urlparse(forged.info.artifact_uri).path) / "run.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["metrics"][metric] = 0.987654
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    second = _sweep(tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    client, runs = _store(tmp_path)
    parent2, kids2 = _last_sweep(client, runs)
    assert parent2.info.run_id != parent.info.run_id
    assert all("ragbench.reused_from" in r.data.tags for r in kids2)  # both resumed from their records
    rows = {r["retrieval.topk"]: r for r in csv.DictReader(io.StringIO(_artifact(client, parent2.info.run_id,
                                                                                  "runs.csv")))}
    assert float(rows["5"][metric]) == 0.987654
    assert float(rows["3"][metric]) == other.data.metrics[metric]
    assert "0.9877" in second.stdout

    # a truncated record: not resumed from (one line names it), the job runs again and the sweep succeeds
    path = Path(urlparse(other.info.artifact_uri).path) / "run.json"
    path.write_text(path.read_text(encoding="utf-8")[:300], encoding="utf-8")
    third = _sweep(tmp_path)
    assert third.returncode == 0, third.stderr[-3000:]
    said = [line for line in third.stderr.splitlines() if "not resumed from it" in line]
    assert len(said) == 1 and other.info.run_id in said[0] and "run.json is cut off" in said[0]
    client, runs = _store(tmp_path)
    _, kids3 = _last_sweep(client, runs)
    reused = {r.data.params["retrieval.topk"]: "ragbench.reused_from" in r.data.tags for r in kids3}
    assert reused == {"3": False, "5": True}
