"""The failure taxonomy agrees with the headline retrieval metrics, for the oracle baseline too: its hits are the
evidence anchors (a paragraph, when the index searches sentences), in no chunk qrel, yet covering every gold unit."""

from __future__ import annotations

import json

import pytest

from ragbench.compare import taxonomy as tx
from ragbench.compare.runcases import from_rows, from_scores_document, scores_document
from ragbench.evidence import EvidenceMatcher
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.judge.retrieval import metric_ks, retrieval_scores
from ragbench.record import case_record
from ragbench.retrieval.baselines import Oracle
from ragbench.types import CaseResult, Document, Evidence, Hit, Paragraph, Query, Section

DOC = Document(doc_id="d", title="Doc", sections=(
    Section(title="S1", paragraphs=(
        Paragraph("Alice adopted a cat. The cat is called Tom.", ref="D1:1"),
        Paragraph("Bob bought a red bicycle last spring.", ref="D1:2"),
    )),
))
TREE = HierarchicalChunker().chunk([DOC])  # searched: the sentences d#s0.p0.t0, d#s0.p0.t1, d#s0.p1.t0
# the evidence is a whole paragraph's text (as QASPER's): it matches no one sentence, so its anchor is the paragraph
QUERY = Query(qid="q1", text="What is the cat called?", answers=("Tom",), question_type="single-hop",
              evidence=(Evidence(text="Alice adopted a cat. The cat is called Tom."),), doc_ids=("d",))


def _row(hits: list[Hit], topk: int, **scores: float) -> dict:
    """A cases.jsonl row as the job writes it: the case's retrieval scores and its record."""
    emap = EvidenceMatcher(TREE).match(QUERY)
    found = retrieval_scores(TREE, emap, hits, metric_ks(topk), topk)
    case = CaseResult(query=QUERY, hits=tuple(hits), contexts=(), answer=None, scores=found)
    return {"qid": QUERY.qid, "question_type": QUERY.question_type, "status": "ok", **found, **scores,
            **case_record(case, TREE, emap, dataset="d", topk=topk).fields}


def _both(row: dict, topk: int) -> list:
    """The run read from its cases.jsonl, and from its case_scores.json (as compare reads a run)."""
    doc = json.loads(json.dumps(scores_document([row])))
    return [from_rows([row], run_id="r", name="r", dataset="d", topk=topk),
            from_scores_document(doc, run_id="r", source="t", name="r", dataset="d", topk=topk)]


def test_root_cause_the_oracles_hits_are_anchors_outside_the_chunk_qrels():
    emap = EvidenceMatcher(TREE).match(QUERY)
    hits = Oracle().hits_for(emap)
    assert [h.chunk_id for h in hits] == ["d#s0.p0"]  # the paragraph the evidence matched
    row = _row(hits, 3)
    assert set(row["qrels"]["chunk"]) == {"d#s0.p0.t0", "d#s0.p0.t1"}  # the searched sentences inside it
    assert row["ranked_ids"] == ["d#s0.p0"] and row["hit_units"] == [["ev0"]]
    # the headline counts evidence units a hit covers; the chunk-level figure counts chunk ids
    assert row["retrieval/hit_at_3"] == 1.0 and row["retrieval/chunk/hit_at_3"] == 0.0


@pytest.mark.parametrize(("answer_f1", "want"), [(1.0, tx.ANSWERED_RIGHT), (0.0, tx.ANSWERED_WRONG)])
def test_an_oracle_case_is_retrieved_as_its_hit_at_k_says(answer_f1, want):
    row = _row(Oracle().hits_for(EvidenceMatcher(TREE).match(QUERY)), 3,
               **{"context/evidence_text_recall": 1.0, "answer/f1": answer_f1})
    for run in _both(row, 3):
        assert tx.classify(run, 0, 3, 10)[0] == want  # was not_retrieved: its id is in no chunk qrel
        assert tx.taxonomy(run).counts["all"] == {want: 1}
    assert tx.gold_flags(row) == [True]  # the drill-down's ★


@pytest.mark.parametrize(("ranked", "topk", "want", "flags"), [
    # a real retriever's hits are searched sentences: the units, the metrics and the chunk ids all agree
    (["d#s0.p1.t0", "d#s0.p0.t1"], 1, tx.BELOW_K, [False, True]),
    (["d#s0.p0.t0", "d#s0.p1.t0"], 1, tx.LOST_BY_EXPANSION, [True, False]),
    (["d#s0.p1.t0"], 1, tx.NOT_RETRIEVED, [False]),
])
def test_every_reading_agrees_for_hits_at_the_searched_level(ranked, topk, want, flags):
    row = _row([Hit(cid, 1.0, i) for i, cid in enumerate(ranked, start=1)], topk,
               **{"context/evidence_text_recall": 0.0})
    chunk_only = {k: v for k, v in row.items() if k != "hit_units" and not k.startswith("retrieval/")}
    for run in [*_both(row, topk), from_rows([chunk_only], run_id="r", name="r", dataset="d", topk=topk)]:
        assert tx.classify(run, 0, topk, 10)[0] == want
    assert tx.gold_flags(row) == tx.gold_flags({k: v for k, v in row.items() if k != "hit_units"}) == flags


def test_unit_flags_follow_the_unit_grades():
    row = {"ranked_ids": ["a", "b", "c"], "hit_units": [[], ["ev1"], ["ev0", "ev1"]],
           "qrels": {"chunk": {}, "unit": {"ev0": 1, "ev1": 0}}}
    assert tx.unit_flags(row) == ({"ev0"}, [False, False, True])  # ev1 is graded 0: not gold
    assert tx.unit_flags({"ranked_ids": ["a"], "qrels": {"g": 1}}) is None  # no units recorded: chunk ids decide
