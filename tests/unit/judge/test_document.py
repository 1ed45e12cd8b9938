"""Document-level retrieval metrics: hand-worked with several chunks of one document hit, and equal to
pytrec_eval (trec_eval) on BM25 rankings of a BEIR-format fixture; the document chunker."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ragbench.datasets.beir import BEIRAdapter
from ragbench.evidence import EvidenceMatcher
from ragbench.ingest.document import DocumentChunker, unit_text
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.judge.document import (
    SELF_HIT,
    case_document_scores,
    document_ks,
    document_qrels,
    document_ranking,
    document_scores,
    record_fields,
    scores_from_record,
)
from ragbench.retrieval.bm25 import BM25Retriever
from ragbench.types import Document, Hit, Paragraph, Section
from tests.fixtures.beir import write_beir


def test_hand_worked_several_chunks_of_one_document() -> None:
    # six hits; A is hit at ranks 1, 2 and 5: A is ranked first, its later hits are dropped -> A, B, C, D
    ranked = ["A", "A", "B", "C", "A", "D"]
    qrels = {"A": 1, "D": 2, "E": 1}
    assert document_ranking(ranked) == ["A", "B", "C", "D"]
    s = document_scores(ranked, qrels, [3, 4, 6])
    idcg = 2 + 1 / math.log2(3) + 1 / math.log2(4)  # ideal gains 2, 1, 1
    assert s["retrieval/doc/hit_at_3"] == 1.0
    assert s["retrieval/doc/recall_at_3"] == pytest.approx(1 / 3, abs=1e-12)
    assert s["retrieval/doc/precision_at_3"] == pytest.approx(1 / 3, abs=1e-12)
    assert s["retrieval/doc/ndcg_at_3"] == pytest.approx(1 / idcg, abs=1e-12)
    assert s["retrieval/doc/map_at_3"] == pytest.approx(1 / 3, abs=1e-12)
    assert s["retrieval/doc/ndcg_at_4"] == pytest.approx((1 + 2 / math.log2(5)) / idcg, abs=1e-12)
    assert s["retrieval/doc/recall_at_4"] == pytest.approx(2 / 3, abs=1e-12)
    assert s["retrieval/doc/precision_at_4"] == pytest.approx(2 / 4, abs=1e-12)
    assert s["retrieval/doc/map_at_4"] == pytest.approx((1 / 1 + 2 / 4) / 3, abs=1e-12)
    assert s["retrieval/doc/precision_at_6"] == pytest.approx(2 / 6, abs=1e-12)  # four documents, P@6 over 6
    assert s["retrieval/doc/mrr_at_10"] == 1.0 and "retrieval/doc/mrr" not in s  # no uncut MRR
    assert SELF_HIT not in s


def test_mrr_is_one_per_ranking_whatever_the_depth_scored():
    # a top-k sweep scores max(10, top-k) hits of one ranking: chunks of A fill the first 10, B comes 11th
    ranked = ["A"] * 10 + ["B", "C"] + ["D"] * 88
    qrels = {"B": 1}
    at = {k: document_scores(ranked[:max(10, k)], qrels, document_ks(k)) for k in (5, 10, 20, 100)}
    assert {k: s["retrieval/doc/mrr_at_10"] for k, s in at.items()} == {5: 0.0, 10: 0.0, 20: 0.0, 100: 0.0}
    assert at[20]["retrieval/doc/mrr_at_20"] == 0.5  # the cut-off in the name reads its own depth
    assert not any(key == "retrieval/doc/mrr" for s in at.values() for key in s)


def test_identical_ids_are_removed_and_counted() -> None:
    s = document_scores(["Q", "A", "Q", "B"], {"B": 1}, [1, 2], ignore=["Q"])
    assert s["retrieval/doc/mrr_at_10"] == 0.5 and s["retrieval/doc/hit_at_2"] == 1.0 and s[SELF_HIT] == 1.0
    assert document_scores(["A", "B"], {"B": 1}, [2], ignore=["Q"])[SELF_HIT] == 0.0
    assert document_scores(["A"], {}, [1]) == {}


def test_document_ks_follow_beir_up_to_the_jobs_topk() -> None:
    assert document_ks(5) == [1, 3, 5]
    assert document_ks(100) == [1, 3, 5, 10, 100]
    assert document_ks(20) == [1, 3, 5, 10, 20]


def test_document_chunker_one_unit_per_document() -> None:
    docs = [Document(doc_id="d1", title="T", sections=(Section(title="T", paragraphs=(
                Paragraph(text="T first", ref="r1"), Paragraph(text="second", ref="r2"))),
                Section(title="Methods", paragraphs=(Paragraph(text="third"),)))),
            Document(doc_id="d2", title="raw", text="raw text only"),
            Document(doc_id="d3", title="empty")]
    tree = DocumentChunker().chunk(docs)
    units = tree.searchable()
    assert [u.chunk_id for u in units] == ["d1#d", "d2#d"]
    assert units[0].text == "T first\nsecond\nMethods\nthird" == unit_text(docs[0])
    assert units[0].refs == ("r1", "r2") and tree["d1#d"].parent_id == "d1"
    assert tree["d3"].children == ()  # no text: nothing to retrieve


def _bm25_runs(root: Path, chunker) -> tuple[BEIRAdapter, object, dict[str, list[Hit]]]:
    adapter = BEIRAdapter(name="beir", path=str(root))
    es = adapter.load()
    tree = chunker.chunk(es.documents)
    units = tree.searchable()
    bm25 = BM25Retriever()
    bm25.build(ids=[u.chunk_id for u in units], texts=[u.text for u in units])
    hits = bm25.search(texts=[q.text for q in es.queries], k=len(units))
    return adapter, (es, tree), {q.qid: h for q, h in zip(es.queries, hits, strict=True)}


def test_equal_to_pytrec_eval_on_a_beir_fixture(tmp_path: Path) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    adapter, (es, tree), runs = _bm25_runs(write_beir(tmp_path / "b"), DocumentChunker())
    matcher = EvidenceMatcher(tree)
    qrels, run, run10, ours = {}, {}, {}, {}
    self_hits = 0
    for q in es.queries:
        emap = matcher.match(q)
        qrels[q.qid] = document_qrels(q, emap, tree)
        hits = runs[q.qid]
        # BEIR's EvaluateRetrieval: the document whose id is the query's is popped from the results
        run[q.qid] = {tree[h.chunk_id].doc_id: 1.0 / h.rank for h in hits if tree[h.chunk_id].doc_id != q.qid}
        run10[q.qid] = {tree[h.chunk_id].doc_id: 1.0 / h.rank for h in hits[:10]
                        if tree[h.chunk_id].doc_id != q.qid}
        ours[q.qid] = case_document_scores(adapter, tree, emap, q, hits, 100)
        self_hits += ours[q.qid][SELF_HIT] == 1.0
    assert self_hits == 1  # the query "glacier-2" retrieves the document "glacier-2": ignored, counted
    official = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "map_cut.100", "recip_rank"})
    got = official.evaluate(run)
    first10 = official.evaluate(run10)  # MRR@10: recip_rank of the documents of the first 10 hits
    for qid, theirs in got.items():
        assert ours[qid]["retrieval/doc/ndcg_at_10"] == pytest.approx(theirs["ndcg_cut_10"], abs=1e-9)
        assert ours[qid]["retrieval/doc/recall_at_100"] == pytest.approx(theirs["recall_100"], abs=1e-9)
        assert ours[qid]["retrieval/doc/map_at_100"] == pytest.approx(theirs["map_cut_100"], abs=1e-9)
        assert ours[qid]["retrieval/doc/mrr_at_10"] == pytest.approx(first10[qid]["recip_rank"], abs=1e-9)
    mean = sum(o["retrieval/doc/ndcg_at_10"] for o in ours.values()) / len(ours)
    assert mean == pytest.approx(sum(t["ndcg_cut_10"] for t in got.values()) / len(got), abs=1e-9)
    assert 0.3 < mean < 1.0  # BM25 finds the topic's documents, not all of them first


def test_chunked_documents_rank_at_their_first_hit(tmp_path: Path) -> None:
    adapter, (es, tree), runs = _bm25_runs(write_beir(tmp_path / "b"),
                                     HierarchicalChunker(max_sentence_chars=20, max_paragraph_chars=40))
    matcher = EvidenceMatcher(tree)
    q = es.queries[0]
    hits = runs[q.qid][:10]
    emap = matcher.match(q)
    docs = [tree[h.chunk_id].doc_id for h in hits]
    assert len(set(docs)) < len(docs)  # sentences of one document hit more than once
    got = case_document_scores(adapter, tree, emap, q, hits, 10)
    assert got == document_scores(docs, document_qrels(q, emap, tree), [1, 3, 5, 10], ignore=[q.qid])


def test_the_case_record_recomputes_the_document_scores(tmp_path: Path) -> None:
    adapter, (es, tree), runs = _bm25_runs(write_beir(tmp_path / "b"), DocumentChunker())
    matcher = EvidenceMatcher(tree)
    q = next(q for q in es.queries if q.qid == "glacier-2")
    emap = matcher.match(q)
    hits = runs[q.qid][:10]
    scores = case_document_scores(adapter, tree, emap, q, hits, 10)
    row = {"ranked_doc_ids": [tree[h.chunk_id].doc_id for h in hits], "topk": 10,
           **record_fields(scores, q, emap, tree)}
    assert row["doc_ignore"] == ["glacier-2"]
    assert scores_from_record(row) == scores
    assert scores_from_record({"ranked_doc_ids": [], "topk": 5}) == {}
