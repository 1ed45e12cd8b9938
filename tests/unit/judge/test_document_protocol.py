"""Datasets judged per document: which adapters declare it, what their document qrels are, which figure the
sweep table and the terminal summary lead with; and a dataset without gold answers runs as stages=retrieval."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from ragbench.datasets.beir import BEIRAdapter
from ragbench.datasets.financebench import FinanceBenchAdapter
from ragbench.datasets.multihop_rag import MultiHopRAGAdapter
from ragbench.datasets.qasper import QasperAdapter
from ragbench.errors import DatasetError
from ragbench.evidence import EvidenceMatcher
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.job_metrics import at_k_views
from ragbench.judge.document import document_qrels, is_document_level
from ragbench.pipeline import Pipeline
from ragbench.stages import answer_stages
from ragbench.sweep import ranking_metric
from ragbench.tracking.report import at_topk_rows
from tests.fixtures.toy import ToyAdapter, toy_components


@pytest.mark.parametrize(("adapter", "level"), [(BEIRAdapter, True), (MultiHopRAGAdapter, True),
                                                 (FinanceBenchAdapter, True), (QasperAdapter, False)])
def test_which_datasets_judge_relevance_per_document(adapter, level):
    assert is_document_level(adapter(name="x")) is level


def test_multihop_document_qrels_are_the_articles_its_facts_name():
    es = MultiHopRAGAdapter(name="multihop_rag").load()
    tree = HierarchicalChunker().chunk(es.documents)
    matcher = EvidenceMatcher(tree)
    for q in es.queries:
        if q.evidence:
            assert document_qrels(q, matcher.match(q), tree) == dict.fromkeys(q.doc_ids, 1)


def test_financebench_document_qrels_are_the_questions_filing():
    es = FinanceBenchAdapter(name="financebench").load()
    tree = HierarchicalChunker().chunk(es.documents)
    matcher = EvidenceMatcher(tree)
    for q in es.queries:
        if q.evidence:
            assert document_qrels(q, matcher.match(q), tree) == {q.doc_ids[0]: 1}


@pytest.mark.parametrize(("rows", "asked", "used"), [
    # auto: the document-level figure when every finished job has it (the published nDCG@10 first)
    ([{"retrieval/doc/ndcg_at_10": 0.6, "retrieval/doc/ndcg_at_topk": 0.7, "answer/f1": 0.2}], "auto",
     "retrieval/doc/ndcg_at_10"),
    ([{"retrieval/doc/ndcg_at_topk": 0.7}, {"retrieval/doc/ndcg_at_10": 0.6, "retrieval/doc/ndcg_at_topk": 0.5},
      {"status": "FAILED"}], "auto", "retrieval/doc/ndcg_at_topk"),  # a top-k 5,20 sweep
    ([{"answer/f1": 0.2, "retrieval/doc/ndcg_at_topk": 0.7}, {"answer/f1": 0.3}], "auto", "answer/f1"),  # mixed
    ([{"retrieval/mrr_at_10": 0.3}], "auto", "retrieval/mrr_at_10"),  # stages=retrieval, passage level
    ([{"retrieval/doc/ndcg_at_10": 0.6, "answer/f1": 0.2}], "answer/f1", "answer/f1"),  # asked: kept
])
def test_sweep_ranking_leads_with_the_document_figure(rows, asked, used):
    assert ranking_metric(rows, asked) == used


def test_document_figures_at_the_jobs_own_k_line_up_in_a_topk_sweep():
    metrics = {"retrieval/doc/ndcg_at_5": 0.4, "retrieval/doc/ndcg_at_10": 0.5, "retrieval/doc/recall_at_10": 0.9,
               "retrieval/ndcg_at_10": 0.3}
    fixed, curves = at_k_views(metrics, 10)
    assert fixed["retrieval/doc/ndcg_at_topk"] == 0.5 and fixed["retrieval/doc/recall_at_topk"] == 0.9
    assert fixed["retrieval/ndcg_at_topk"] == 0.3 and set(curves) == {"retrieval/ndcg_at_k_curve"}


def test_summary_leads_with_document_figures_only_when_they_were_logged():
    doc = {"retrieval/doc/ndcg_at_5": 0.4, "retrieval/doc/recall_at_5": 0.5, "retrieval/doc/hit_at_5": 0.6}
    assert at_topk_rows(doc, 5)[:3] == ["retrieval/doc/ndcg_at_5", "retrieval/doc/recall_at_5",
                                         "retrieval/doc/hit_at_5"]
    assert at_topk_rows({}, 5)[0] == "retrieval/ndcg_at_5"


class _NoGold(ToyAdapter):
    """The toy set with the answers of some (or all) answerable questions left out."""

    def __init__(self, qids: tuple[str, ...]) -> None:
        self.qids = qids

    def load(self):  # noqa: ANN201 - test double
        es = super().load()
        return replace(es, queries=tuple(replace(q, answers=()) if q.qid in self.qids else q for q in es.queries))


def test_no_gold_answers_scores_retrieval_only_and_says_so(caplog):
    with caplog.at_level(logging.WARNING):
        result = Pipeline(toy_components(dataset=_NoGold(("q1", "q2")))).run()
    assert "scoring retrieval only, as stages=retrieval" in caplog.text
    assert all(c.answer is None for c in result.cases) and "answer/f1" not in result.metrics
    assert "retrieval/hit_at_1" in result.metrics


def test_some_gold_answers_missing_is_refused_with_the_fix():
    with pytest.raises(DatasetError) as info:
        Pipeline(toy_components(dataset=_NoGold(("q1",)))).run()
    assert "1 of 2 answerable questions have no gold answer" in str(info.value)
    assert "stages=retrieval" in str(info.value).partition("fix: ")[2]


def test_a_dataset_declaring_no_answers_drops_generation_before_any_request(caplog):
    components = toy_components(dataset=BEIRAdapter(name="beir", path="/nowhere"))
    with caplog.at_level(logging.WARNING):
        retrieval_only = answer_stages(components)  # before the dataset is read: BEIR has no gold answers
    assert retrieval_only.generator is None and retrieval_only.judges == {}
    assert "beir: the questions have no gold answers" in caplog.text
    kept = toy_components()
    assert answer_stages(kept) is kept and answer_stages(kept, kept.dataset.load().queries) is kept
