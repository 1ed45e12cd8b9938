"""MLflow's own conventions, so its UI opens on the runs and draws something worth looking at."""

from __future__ import annotations

import pytest

from tests.fixtures.jobs import run_job

pytestmark = pytest.mark.slow


def test_a_job_logs_curves_by_k_fixed_names_and_standard_tags(tmp_path):
    run, client = run_job(["dataset=qasper", "dataset.sample_size=6", "retrieval=bm25", "retrieval.topk=10"], tmp_path)
    assert run.info.status == "FINISHED"
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    tags, m = run.data.tags, run.data.metrics
    assert tags["mlflow.source.type"] == "LOCAL" and tags["mlflow.source.name"] == "python -m ragbench"
    if tags["ragbench.git_commit"] != "unknown":
        assert tags["mlflow.source.git.commit"] == tags["ragbench.git_commit"].removesuffix("+dirty")
    # the @k curves: one point per reported cut-off, k as the step, equal to the per-k metrics
    for name in ("hit", "recall", "ndcg"):
        history = client.get_metric_history(run.info.run_id, f"retrieval/{name}_at_k_curve")
        assert sorted(p.step for p in history) == [1, 3, 5, 10]
        assert all(p.value == pytest.approx(m[f"retrieval/{name}_at_{p.step}"]) for p in history)
    # the job's own cut-off under one fixed name, and the compact headline set
    assert m["retrieval/hit_at_topk"] == m["retrieval/hit_at_10"]
    assert m["headline/hit_at_topk"] == m["retrieval/hit_at_10"]
    assert m["headline/answer_f1"] == m["answer/f1"] and m["headline/mrr"] == m["retrieval/mrr"]
    # every other metric stays a single value at step 0
    assert [p.step for p in client.get_metric_history(run.info.run_id, "retrieval/mrr")] == [0]
