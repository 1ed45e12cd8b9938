"""The fixed-name and curve views of a job's @k metrics, and MLflow's standard source tags."""

from __future__ import annotations

from ragbench.job_metrics import at_k_views
from ragbench.tracking.environment import source_tags


def test_curves_use_k_as_step_and_topk_gets_one_fixed_name():
    metrics = {"retrieval/hit_at_1": 0.2, "retrieval/hit_at_3": 0.4, "retrieval/hit_at_5": 0.6,
               "retrieval/hit_at_10": 0.8, "retrieval/recall_at_10": 0.7, "retrieval/mrr": 0.3,
               "retrieval/chunk/hit_at_1": 0.9, "by_type/x/retrieval/hit_at_1": 1.0, "answer/f1": 0.25}
    fixed, curves = at_k_views(metrics, topk=10)
    assert curves == {"retrieval/hit_at_k_curve": {1: 0.2, 3: 0.4, 5: 0.6, 10: 0.8},
                      "retrieval/recall_at_k_curve": {10: 0.7}}
    assert fixed["retrieval/hit_at_topk"] == 0.8 and fixed["retrieval/recall_at_topk"] == 0.7
    assert fixed["headline/hit_at_topk"] == 0.8 and fixed["headline/answer_f1"] == 0.25
    assert "headline/judge_accuracy" not in fixed  # only figures the job has


def test_a_topk_sweep_lines_up_under_one_name():
    jobs = {k: {f"retrieval/hit_at_{c}": c / 10 for c in sorted({1, 3, 5, k})} for k in (3, 5, 10)}
    assert [at_k_views(m, k)[0]["retrieval/hit_at_topk"] for k, m in jobs.items()] == [0.3, 0.5, 1.0]


def test_source_tags_are_mlflows_own():
    tags = source_tags()
    assert tags["mlflow.source.type"] == "LOCAL" and tags["mlflow.source.name"] == "python -m ragbench"
    assert "+dirty" not in tags.get("mlflow.source.git.commit", "")
