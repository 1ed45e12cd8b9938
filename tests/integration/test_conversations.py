"""Conversations end to end (docs/conversations.md): the issue's done-when sweep `-m query=none,contextualize`
on the bundled MTRAG sample, compare's per-turn table with its CIs, the records' conversation fields, and
verify recomputing the per-turn and per-conversation metrics. One sweep (BM25, stages=retrieval: no model
loads) shared by the module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.jobs import python_module

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    cwd = tmp_path_factory.mktemp("conversations")
    proc = python_module(["ragbench", "-m", "dataset=mtrag", "stages=retrieval", "retrieval=bm25",
                          "query=none,contextualize"], cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{cwd}/mlruns/mlflow.db")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              filter_string="tags.`ragbench.role` = 'job'")
    assert len(runs) == 2
    for run in runs:  # the per-turn and per-conversation figures are logged
        assert run.data.metrics["conversation/count"] == 8
        assert "by_turn/3plus/retrieval/doc/ndcg_at_5" in run.data.metrics
        assert "conversation/all_correct/retrieval/doc/hit_at_5" in run.data.metrics
        rows = [json.loads(line) for line in Path(client.download_artifacts(run.info.run_id, "cases.jsonl",
                                                                            str(cwd))).read_text().splitlines()]
        assert all(r["qid"] == f"{r['conversation']}#{r['turn']}" for r in rows)
    return cwd, [r.info.run_id for r in runs]


def test_compare_shows_the_follow_up_gap_with_its_ci(sweep):
    cwd, _ = sweep
    proc = python_module(["ragbench.compare", "--metric", "retrieval/doc/ndcg_at_5"], cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "mtrag: delta by conversation turn" in out
    rows = [line for line in out.splitlines() if line.strip().startswith("turn=")]
    assert [r.split()[0] for r in rows] == ["turn=1", "turn=2", "turn=3plus"]
    follow = rows[-1].split()
    assert follow[1] == "ndcg@5" and follow[2] == "12" and "[" in rows[-1]  # n, delta and its CI
    assert all(len(line) <= 80 for line in out.splitlines() if "turn" in line)


def test_verify_recomputes_the_turn_and_conversation_metrics(sweep):
    cwd, run_ids = sweep
    proc = python_module(["ragbench.verify", run_ids[0]], cwd)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "OK: every metric matches to 1e-9" in proc.stdout
