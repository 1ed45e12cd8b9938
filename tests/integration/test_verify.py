"""A real job on the bundled LoCoMo sample: its case record reproduces every logged retrieval, context and
answer metric (``python -m ragbench.verify`` exits 0), a tampered case, run.json (edited, cut to 300 bytes,
``[]``) or MLflow metric is caught (exit 1), document scope
keeps every hit in the question's conversation, and sweeping the scope encodes the corpus once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragbench.verify import main as verify
from tests.fixtures.jobs import run_job
from tests.fixtures.llm_server import LLMServer

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
KEY_ENV = "RAGBENCH_VERIFY_KEY"


@pytest.fixture(scope="module")
def server():
    with LLMServer() as srv:
        yield srv


def _rows(client, run) -> list[dict]:
    path = client.download_artifacts(run.info.run_id, "cases.jsonl")
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_verify_reproduces_a_job_and_catches_tampering(server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, "not-a-secret")
    run, client = run_job([
        "dataset=locomo", "dataset.sample_size=30", "retrieval=bm25", f"cache.dir={tmp_path}/cache",
        "llm=openai_compatible", "llm.model=openai/gen-model", f"llm.api_base={server.url}",
        f"llm.api_key_env={KEY_ENV}", "judge=[lexical,llm]", "judge.model=openai/judge-model",
        f"judge.api_base={server.url}", f"judge.api_key_env={KEY_ENV}",
    ], tmp_path)
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    run_id = run.info.run_id
    assert run.data.params["retrieval.scope"] == "document"  # LoCoMo's official protocol is the default
    rows = _rows(client, run)
    assert len(rows) == 30
    # document scope: no hit from another conversation, down to the deepest cut-off
    assert all(d in r["doc_ids"] for r in rows for d in r["ranked_doc_ids"])
    assert all(len(r["ranked_ids"]) == 10 and r["contexts"] and r["contexts"][0]["text"] for r in rows)
    assert any(r["qrels"]["chunk"] and r["qrels"]["unit"] for r in rows)
    notes = [r["judge_notes"]["llm"] for r in rows]
    assert all(n["accuracy"]["rubric"] for n in notes)
    assert any(n["accuracy"]["reasoning"] == ["fixture server: always correct"] for n in notes)
    assert "answer/locomo_f1" in run.data.metrics and "context/openviking_recall" in run.data.metrics

    assert verify([run_id, "--tracking-uri", uri]) == 0
    assert "OK: every metric matches to 1e-9" in capsys.readouterr().out

    # the record is the evidence: a case whose ranking was edited no longer gives the logged figures
    cases = next(p for p in tmp_path.rglob("cases.jsonl") if run_id in str(p) and "artifacts" in p.parts)
    original = cases.read_text()
    lines = original.splitlines()
    at = next(i for i, line in enumerate(lines) if json.loads(line)["qrels"]["unit"])
    row = json.loads(lines[at])
    row["ranked_ids"] = row["ranked_ids"][::-1]
    row["hit_units"] = row["hit_units"][::-1]
    lines[at] = json.dumps(row)
    cases.write_text("\n".join(lines) + "\n")
    assert verify([run_id, "--tracking-uri", uri]) == 1
    assert "FAILED" in capsys.readouterr().out
    cases.write_text(original)
    assert verify([run_id, "--tracking-uri", uri]) == 0
    capsys.readouterr()

    # the record is read too: run.json's metrics must equal the recomputation and MLflow's, its config the
    # logged params; an edited, truncated or non-record run.json fails naming the file and what differs
    run_file = next(p for p in tmp_path.rglob("run.json") if run_id in str(p) and "artifacts" in p.parts)
    record = run_file.read_text()
    forged = json.loads(record)
    forged["metrics"]["answer/f1"] = 0.99
    run_file.write_text(json.dumps(forged, indent=1))
    assert verify([run_id, "--tracking-uri", uri]) == 1
    out = capsys.readouterr().out
    assert f"run metric answer/f1: run.json 0.99, MLflow {run.data.metrics['answer/f1']:.10g}, recomputed" in out
    forged = json.loads(record)
    forged["config"]["retrieval"]["topk"] = 7
    run_file.write_text(json.dumps(forged, indent=1))
    assert verify([run_id, "--tracking-uri", uri]) == 1
    assert "run.json config retrieval.topk: '7', MLflow param '5'" in capsys.readouterr().out
    for damaged, phrase in ((record[:300], "run.json is cut off (the file is truncated)"),
                            ("[]", "run.json is an array, not a ragbench-run/2 record")):
        run_file.write_text(damaged)
        assert verify([run_id, "--tracking-uri", uri]) == 1
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and f"FAILED: run {run_id}: {phrase}" in err, err
    run_file.write_text(record)
    assert verify([run_id, "--tracking-uri", uri]) == 0
    capsys.readouterr()

    client.log_metric(run_id, "answer/f1", run.data.metrics["answer/f1"] + 1e-6)
    assert verify([run_id, "--tracking-uri", uri]) == 1
    assert "run metric answer/f1: run.json " in capsys.readouterr().out  # MLflow differs from the record

    assert verify(["0" * 32, "--tracking-uri", uri]) == 2
    assert verify([run_id, "--tracking-uri", f"sqlite:///{tmp_path}/nowhere/mlflow.db"]) == 2
    assert "no MLflow store" in capsys.readouterr().err


def test_sweeping_scope_encodes_the_corpus_once(server, tmp_path):
    store = tmp_path / "mlruns"
    env = {**os.environ, "PYTHONPATH": str(REPO), KEY_ENV: "not-a-secret"}
    cmd = [sys.executable, "-m", "ragbench", "-m", "retrieval.scope=document,corpus", "retrieval=hybrid",
           "dataset=locomo", "dataset.sample_size=20", "embedder=api", "embedder.model=openai/emb-model",
           f"embedder.api_base={server.url}", f"embedder.api_key_env={KEY_ENV}",
           f"cache.dir={tmp_path}/cache", f"tracking.uri=sqlite:///{store}/mlflow.db",
           f"tracking.artifact_root={store}/artifacts", f"hydra.sweep.dir={tmp_path}/multirun"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{store}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("ragbench").experiment_id],
                              filter_string="tags.`ragbench.role` = 'job'", order_by=["attributes.start_time ASC"])
    by_scope = {r.data.params["retrieval.scope"]: r for r in runs}
    assert set(by_scope) == {"document", "corpus"}
    first, second = (r.data.metrics for r in runs)
    assert first["ingest/embedded_texts"] > 0 and second["ingest/embedded_texts"] == 0  # encoded once
    assert second["cache/index/hits"] == 1
    fps = {r.data.tags["ragbench.index_sha256"] for r in runs}
    assert len(fps) == 2  # the scope changes results, so it is in the index fingerprint
    doc_rows = _rows(client, by_scope["document"])
    assert all(d in r["doc_ids"] for r in doc_rows for d in r["ranked_doc_ids"])
