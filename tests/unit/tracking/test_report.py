"""Terminal tables: counts as integers, text never read as rich markup, ranks within a dataset."""

from __future__ import annotations

import io

import pytest
from omegaconf import OmegaConf
from rich.console import Console

from ragbench.tracking import report
from ragbench.tracking.progress import sweep_size
from ragbench.tracking.report import _fmt, comparison_table, is_count, rank_within_dataset


@pytest.mark.parametrize(("key", "value", "shown"), [
    ("cases/failed", 0.0, "0"), ("cases/total", 84.0, "84"), ("by_type/temporal/cases/failed", 0.0, "0"),
    ("counts/chunks", 3469.0, "3,469"), ("sweep/failed_jobs", 0.0, "0"), ("cases/failure_rate", 0.0, "0.0000"),
    ("retrieval/mrr", 0.0, "0.0000"), ("retrieval/hit_at_topk", 1.0, "1.0000"), ("answer/f1", 0.25, "0.2500"),
    ("time/embed_s", 0.0, "0.0000"), ("job", "reranker=[cross_encoder,mmr]", "reranker=\\[cross_encoder,mmr]"),
])
def test_cells(key, value, shown):
    assert _fmt(value, key) == shown


def test_counts_are_told_from_rates():
    assert is_count("cases/failed") and is_count("dataset/queries_by_type/x") and not is_count("cases/failure_rate")
    assert not is_count("retrieval/hit_at_5") and not is_count("answer/f1")


def test_brackets_in_titles_and_labels_are_printed(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(report, "console", Console(file=out, width=200, highlight=False))
    rows = [{"job": "#0 reranker=[cross_encoder,mmr]", "status": "FINISHED", "answer/f1": 0.5}]
    comparison_table(rows, {"job": "job", "status": "status", "answer/f1": "f1"}, title="sweep [reranker=[a,b]]")
    text = out.getvalue()
    assert "reranker=[cross_encoder,mmr]" in text and "sweep [reranker=[a,b]]" in text


def test_rank_is_within_each_dataset_and_failed_jobs_come_last():
    rows = [{"job": "a", "dataset": "locomo", "status": "FINISHED", "answer/f1": 0.2},
            {"job": "b", "dataset": "qasper", "status": "FINISHED", "answer/f1": 0.9},
            {"job": "c", "dataset": "locomo", "status": "FAILED"},
            {"job": "d", "dataset": "locomo", "status": "FINISHED", "answer/f1": 0.4}]
    ranked = rank_within_dataset(rows, "answer/f1")
    assert [(r["job"], r["rank"]) for r in ranked] == [("d", 1), ("a", 2), ("c", 3), ("b", 1)]


@pytest.mark.parametrize(("task", "extra", "size"), [
    (["retrieval.topk=3,5,10", "dataset=locomo,qasper"], {}, 6), (["retrieval.topk=3"], {}, 1),
    (["reranker=[cross_encoder,mmr]", "retrieval.topk=1,2"], {}, 2),
    ([], {"params": {"retrieval.topk": "1,2,3"}}, 3), (["dataset=qasper"], {"n_trials": 20}, 20),
])
def test_sweep_size_counts_the_grid(task, extra, size):
    cfg = OmegaConf.create({"hydra": {"overrides": {"task": task}, "sweeper": {"max_batch_size": None, **extra}}})
    assert sweep_size(cfg) == size


@pytest.mark.parametrize(("rows", "asked", "used"), [
    ([{"answer/f1": 0.2, "retrieval/mrr_at_10": 0.3}], "answer/f1", "answer/f1"),
    ([{"retrieval/mrr_at_10": 0.3}, {"retrieval/mrr_at_10": 0.5}], "answer/f1", "retrieval/mrr_at_10"),  # stages=retrieval
    ([{"retrieval/mrr_at_10": 0.3}, {"answer/f1": 0.1}], "answer/f1", "answer/f1"),  # one job has it: kept
    ([{"status": "FAILED"}], "answer/f1", "answer/f1"),  # nothing to rank by at all: the asked one
    ([{"judge/accuracy": 0.7, "retrieval/mrr_at_10": 0.1}], "judge/accuracy", "judge/accuracy"),
])
def test_ranking_metric_falls_back_when_no_job_has_the_asked_one(rows, asked, used):
    from ragbench.sweep import ranking_metric

    assert ranking_metric(rows, asked) == used


def test_summary_says_what_retrieval_is_scored_on():
    from ragbench.tracking.report import retrieval_scope

    metrics = {"counts/retrieval_scored": 54.0, "counts/retrieval_excluded/unanswerable": 12.0,
               "counts/retrieval_excluded/no_evidence": 0.0, "counts/retrieval_excluded/evidence_not_found": 18.0}
    assert retrieval_scope(metrics) == "54 of 84 questions (out: 12 unanswerable, 18 evidence not found)"
    assert retrieval_scope({"counts/retrieval_scored": 3.0}) == "3 of 3 questions"
    assert retrieval_scope({}) is None


def test_the_by_type_table_fits_80_columns_with_whole_headers(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(report, "console", Console(file=out, width=80, highlight=False, color_system=None))
    metrics = {"cases/total": 18.0, "cases/failed": 0.0, "answer/f1": 0.09}
    for t in ("abstractive", "boolean", "extractive"):
        metrics.update({f"by_type/{t}/{k}": v for k, v in {
            "cases/total": 9.0, "cases/failed": 0.0, "retrieval/hit_at_5": 0.6667, "retrieval/mrr_at_10": 0.5,
            "answer/f1": 0.1324, "judge/accuracy": 0.25}.items()})
    report.job_summary(title="ragbench job dataset=qasper", metrics=metrics, fingerprints={}, counts={},
                       timings={}, run_id=None)
    text = out.getvalue()
    table = text[text.index("by question type"):]
    assert max(len(line) for line in text.splitlines()) <= 80 and "…" not in table
    head = next(line for line in table.splitlines() if "type" in line and "cases" in line)
    words = head.replace("┃", " ").split()
    assert words == ["type", "cases", "failed", "hit@5", "mrr@10", "f1", "judge"]
    assert "hit@5 = retrieval/hit_at_5" in table and "abstractive" in table and "0.6667" in table
