"""One "best" per sweep: the sweep table and compare's default baseline rank by the same metric
(runs_table.ranking_metric), and neither ranks a baseline run (retrieval=oracle / none) with the configurations."""

from __future__ import annotations

import pytest

from ragbench.compare.analysis import analyse
from ragbench.compare.runcases import from_rows
from ragbench.tracking.report import rank_within_dataset
from ragbench.tracking.runs_table import baseline_kind, ranking_metric


def _run(run_id: str, *, f1: float | None = None, hit5: float | None = None, mrr: float | None = None,
         baseline: str = "", logged: bool = True, n: int = 10):
    """A run whose every case has these scores, with (``logged``) or without its logged metrics."""
    scores = {k: v for k, v in (("answer/f1", f1), ("retrieval/hit_at_5", hit5), ("retrieval/mrr_at_10", mrr))
              if v is not None}
    rows = [{"qid": f"q{i}", "question_type": "t", "status": "ok", **scores} for i in range(n)]
    return from_rows(rows, run_id=run_id, name=f"#{run_id}", dataset="locomo", topk=5, baseline=baseline,
                     metrics=scores if logged else None)


def _table_first(runs) -> str:
    """The sweep table's first row, built as the sweep callback builds its rows (logged metrics, baseline kind)."""
    rows = [{**r.metrics, "run_id": r.run_id, "dataset": r.dataset, "status": "FINISHED", "baseline": r.baseline}
            for r in runs]
    return rank_within_dataset(rows, ranking_metric(rows))[0]["run_id"]


def test_baseline_kind_is_the_tag():
    assert baseline_kind({"ragbench.baseline": "oracle"}) == "oracle"
    assert baseline_kind({"ragbench.dataset": "locomo"}) == ""


@pytest.mark.parametrize(("rows", "want"), [
    # a closed-book baseline has no retrieval figures: it does not stop the document-level lead
    ([{"retrieval/doc/ndcg_at_10": 0.6}, {"answer/f1": 0.1, "baseline": "closed_book"}], "retrieval/doc/ndcg_at_10"),
    # an oracle with answers does not make a retrieval-only sweep rank on F1
    ([{"retrieval/mrr_at_10": 0.3}, {"answer/f1": 0.9, "retrieval/mrr_at_10": 1.0, "baseline": "oracle"}],
     "retrieval/mrr_at_10"),
    ([{"answer/f1": 0.4, "baseline": "oracle"}], "answer/f1"),  # only baselines: they decide
])
def test_ranking_metric_reads_the_configurations(rows, want):
    assert ranking_metric(rows) == want


def test_retrieval_only_sweep_has_one_best_mrr_not_hit_at_5():
    # a is best on hit@5, b on MRR@10 (the sweep table's ranking metric without answers)
    runs = [_run("a", hit5=1.0, mrr=0.2), _run("b", hit5=0.5, mrr=0.5)]
    comp, _ = analyse(runs, resamples=200)
    assert comp.rank_by == "retrieval/mrr_at_10"
    assert {b.run_id for b in comp.baseline_of.values()} == {"b"} == {_table_first(runs)}
    assert any("the best of 2 configurations on retrieval/mrr_at_10, the sweep table's ranking metric (0.5)" in n
               for n in comp.notes)


def test_answering_sweep_ranks_on_f1_and_never_picks_the_oracle():
    runs = [_run("dense", f1=0.3, hit5=1.0, mrr=0.9), _run("bm25", f1=0.5, hit5=0.5, mrr=0.4),
            _run("oracle", f1=0.9, hit5=1.0, mrr=1.0, baseline="oracle"),
            _run("none", f1=0.1, baseline="closed_book")]
    comp, _ = analyse(runs, resamples=200)
    assert comp.rank_by == "answer/f1"
    assert {b.run_id for b in comp.baseline_of.values()} == {"bm25"} == {_table_first(runs)}
    assert any("the best of 2 configurations (2 baseline runs not considered) on answer/f1" in n for n in comp.notes)
    # the baselines are still compared against it: the oracle as a bound
    assert {r.run for r in comp.records} == {"dense", "bm25", "oracle", "none"}


def test_without_logged_metrics_the_per_case_means_rank():
    runs = [_run("a", hit5=1.0, mrr=0.2, logged=False), _run("b", hit5=0.5, mrr=0.5, logged=False)]
    comp, _ = analyse(runs, resamples=200)
    assert comp.rank_by == "retrieval/mrr_at_10" and {b.run_id for b in comp.baseline_of.values()} == {"b"}


def test_a_tie_goes_to_the_earlier_run_in_both():
    runs = [_run("first", f1=0.5), _run("second", f1=0.5)]  # oldest first, as compare and the sweep read them
    comp, _ = analyse(runs, resamples=200)
    assert {b.run_id for b in comp.baseline_of.values()} == {"first"} == {_table_first(runs)}


def test_only_baselines_selected_picks_among_them_and_says_so():
    runs = [_run("o", f1=0.9, baseline="oracle"), _run("n", f1=0.1, baseline="closed_book")]
    comp, _ = analyse(runs, resamples=200)
    assert {b.run_id for b in comp.baseline_of.values()} == {"o"}
    assert any("the best of 2 runs, all baselines" in n for n in comp.notes)


def test_sweep_rank_leaves_baselines_unranked_after_the_configurations():
    rows = [{"run_id": "oracle", "dataset": "d", "status": "FINISHED", "baseline": "oracle", "answer/f1": 0.9},
            {"run_id": "a", "dataset": "d", "status": "FINISHED", "baseline": "", "answer/f1": 0.3},
            {"run_id": "b", "dataset": "d", "status": "FINISHED", "baseline": "", "answer/f1": 0.5}]
    ranked = rank_within_dataset(rows, "answer/f1")
    assert [(r["run_id"], r["rank"]) for r in ranked] == [("b", 1), ("a", 2), ("oracle", None)]
