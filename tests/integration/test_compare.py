"""Two real jobs (retrieval=bm25 vs dense on the LoCoMo sample) compared by ``python -m ragbench.compare``
in a subprocess: table, JSON, report, the sweep parent's report, baseline files and the CI gate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.jobs import python_module

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]




@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """One real two-job sweep into a fresh sqlite store; returns (folder, {retriever: run}, parent run)."""
    from mlflow import MlflowClient

    cwd = tmp_path_factory.mktemp("compare")
    proc = python_module(["ragbench", "-m", "dataset=locomo", "retrieval=bm25,dense"], cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{cwd}/mlruns/mlflow.db")
    exp = client.get_experiment_by_name("ragbench")
    runs = client.search_runs([exp.experiment_id])
    jobs = {r.data.params["retrieval.retriever._target_"].rsplit(".", 1)[-1]: r
            for r in runs if r.data.tags.get("ragbench.role") == "job"}
    parent = next(r for r in runs if r.data.tags.get("ragbench.role") == "sweep")
    assert set(jobs) == {"BM25Retriever", "FaissRetriever"}
    return cwd, {"bm25": jobs["BM25Retriever"], "dense": jobs["FaissRetriever"]}, parent, client


def test_compare_latest_sweep_json_and_report(sweep):
    cwd, jobs, _, _ = sweep
    proc = python_module(["ragbench.compare", "--json", "out/cmp.json", "--report", "out/report"], cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Holm correction" in proc.stdout and "failure taxonomy" in proc.stdout
    assert "the best of 2 configurations on answer/f1" in proc.stdout  # the default baseline is stated
    doc = json.loads((cwd / "out/cmp.json").read_text())
    recs = doc["records"]
    keys = {"run", "baseline", "metric", "type", "n", "value", "baseline_value", "delta", "ci_low", "ci_high",
            "p_value", "verdict"}
    assert recs and all(keys <= set(r) for r in recs)
    assert {r["metric"] for r in recs} == {"answer/f1", "retrieval/hit_at_5", "retrieval/mrr_at_10", "context/tokens",
                                          "latency/generate_p50_ms"}
    assert {"all", "temporal", "single_hop", "multi_hop"} <= {r["type"] for r in recs}
    # over the full shared question set a run's value is exactly the metric its job logged
    for name, run in jobs.items():
        for metric in ("answer/f1", "retrieval/mrr_at_10", "retrieval/hit_at_5"):
            rec = next(r for r in recs if r["run"] == run.info.run_id and r["metric"] == metric and r["type"] == "all")
            assert rec["value"] == pytest.approx(run.data.metrics[metric], abs=1e-9), (name, metric)
    assert {t["run"] for t in doc["taxonomy"]} == {j.info.run_id for j in jobs.values()}
    for t in (t for t in doc["taxonomy"] if t["type"] == "all"):
        counted = sum(t[c] for c in ("not_retrieved", "ranked_below_k", "lost_by_expansion", "answered_wrong",
                                      "answered_right", "failed", "no_gold_evidence"))
        assert counted == int(jobs["bm25"].data.metrics["cases/total"])
    report = cwd / "out/report"
    assert {"report.md", "comparison.json", "metrics_ci.png", "pareto.png", "by_type_heatmap.png"} <= {
        p.name for p in report.iterdir()}


def test_compare_reads_the_record_and_the_layout_before_it(sweep, tmp_path):
    """Each job's run holds its record (run.json, cases.jsonl) and compare reads what the job was from it; a
    run in the layout before the record (case_scores.json beside cases.jsonl, no run.json) gives the same
    cases, values, NaN positions, types, statuses and taxonomy counts."""
    import numpy as np

    from ragbench.compare.runcases import SCORES_ARTIFACT, scores_document
    from ragbench.compare.select import load_cases
    from ragbench.compare.taxonomy import taxonomy
    from ragbench.record import RUN_FILE, RunRecord

    _, jobs, _, client = sweep
    for run in jobs.values():
        rid = run.info.run_id
        names = {a.path for a in client.list_artifacts(rid)}
        assert {RUN_FILE, "cases.jsonl", "cases_table.json"} <= names and SCORES_ARTIFACT not in names
        record = RunRecord.from_json(Path(client.download_artifacts(rid, RUN_FILE)).read_text())
        assert record.status == "FINISHED" and record.name == run.info.run_name
        assert record.metrics and all(run.data.metrics[k] == v for k, v in record.metrics.items())
        assert record.fingerprints["dataset_sha256"] == run.data.tags["ragbench.dataset_sha256"]
        new = load_cases(client, run)
        assert new.dataset == record.dataset and new.topk == int(run.data.params["retrieval.topk"])
        # the same job in the earlier layout: its MLflow run, cases.jsonl and the compact case_scores.json
        rows = [json.loads(line) for line in Path(client.download_artifacts(rid, "cases.jsonl")).read_text().splitlines()]
        tags = {k: v for k, v in run.data.tags.items() if k != "mlflow.parentRunId"}  # outside the sweep
        old_id = client.create_run(run.info.experiment_id, run_name=run.info.run_name, tags=tags).info.run_id
        for key, value in run.data.params.items():
            client.log_param(old_id, key, value)
        for key, value in run.data.metrics.items():
            client.log_metric(old_id, key, value)
        folder = tmp_path / old_id
        folder.mkdir()
        (folder / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (folder / SCORES_ARTIFACT).write_text(json.dumps(scores_document(rows)))
        client.log_artifacts(old_id, str(folder))
        client.set_terminated(old_id, "FINISHED")
        old = load_cases(client, client.get_run(old_id))
        assert (old.qids, old.types, old.dataset, old.topk) == (new.qids, new.types, new.dataset, new.topk)
        assert (old.ok == new.ok).all() and old.fields.keys() == new.fields.keys() and len(new.fields) > 40
        for key, col in new.fields.items():
            np.testing.assert_array_equal(old.fields[key], col, err_msg=key)  # NaN where NaN, else equal
        assert taxonomy(old).counts == taxonomy(new).counts
        client.delete_run(old_id)


def test_sweep_parent_holds_the_report(sweep):
    _, _, parent, client = sweep
    names = {a.path for a in client.list_artifacts(parent.info.run_id, "compare")}
    assert {"compare/report.md", "compare/comparison.json", "compare/metrics_ci.png"} <= names


def test_gate_against_better_baseline_and_itself(sweep):
    cwd, jobs, _, _ = sweep
    bm25, dense = jobs["bm25"].info.run_id, jobs["dense"].info.run_id
    gate = ["--metric", "retrieval/mrr_at_10", "--fail-on-regression"]
    # the MLflow way: bm25 ranks the LoCoMo evidence significantly better than dense on this sample
    proc = python_module(["ragbench.compare", "--runs", bm25, dense, "--baseline", bm25, *gate], cwd)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "REGRESSION" in proc.stdout and "retrieval/mrr_at_10" in proc.stdout
    # the CI way: committed baseline files, no MLflow run needed for the baseline
    assert python_module(["ragbench.compare", "--runs", bm25, "--save-baseline", "bm25.json"], cwd).returncode == 0
    assert python_module(["ragbench.compare", "--runs", dense, "--save-baseline", "dense.json"], cwd).returncode == 0
    proc = python_module(["ragbench.compare", "--runs", dense, "--baseline-file", "bm25.json", *gate], cwd)
    assert proc.returncode == 1, proc.stdout[-3000:]
    proc = python_module(["ragbench", "compare", "--runs", dense, "--baseline-file", "dense.json", *gate], cwd)
    assert proc.returncode == 0, proc.stdout[-3000:]  # `ragbench compare` is the same command
    assert "gate: pass" in proc.stdout
    # a generous tolerance lets the same regression through
    proc = python_module(["ragbench.compare", "--runs", dense, "--baseline-file", "bm25.json", *gate, "--tolerance", "0.5"],
                   cwd)
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_usage_errors_exit_2(sweep):
    cwd, jobs, _, _ = sweep
    proc = python_module(["ragbench.compare", "--runs", "0123456789abcdef"], cwd)
    assert proc.returncode == 2 and "no run '0123456789abcdef'" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = python_module(["ragbench.compare", "--metric", "answer/f2"], cwd)
    assert proc.returncode == 2 and "--metric answer/f2" in proc.stderr


def test_runs_accept_unique_id_prefixes(sweep, tmp_path, monkeypatch, capsys):
    """``--runs`` takes id prefixes as ``--baseline`` does (issue 27 item 5); in process, on the sweep's store."""
    from ragbench.compare.cli import main as compare

    cwd, jobs, _, _ = sweep
    monkeypatch.chdir(cwd)
    bm25, dense = jobs["bm25"].info.run_id, jobs["dense"].info.run_id
    out = tmp_path / "cmp.json"
    assert compare(["--runs", bm25[:8], dense[:10], "--baseline", bm25[:8], "--metric", "retrieval/hit_at_5",
                    "--resamples", "200", "--json", str(out)]) == 0
    assert {r["run"] for r in json.loads(out.read_text())["records"]} == {bm25, dense}
    capsys.readouterr()
    assert compare(["--runs", bm25[:8], "ffffffff"]) == 2
    assert "--runs: no run 'ffffffff'" in capsys.readouterr().err


def test_ctrl_c_while_the_store_is_read_is_one_line_and_exit_130(tmp_path):
    """SIGINT while the store answers slowly (a server that accepts and never replies): one line, exit 130,
    no traceback (issue 27 item 5)."""
    import signal
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(120)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen([sys.executable, "-m", "ragbench.compare", "--tracking-uri",
                                 f"http://127.0.0.1:{server.getsockname()[1]}"], cwd=tmp_path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        conn, _ = server.accept()  # the comparison is now waiting on the store
        with conn:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    assert err == "ragbench.compare: interrupted; rerun the command\n"
