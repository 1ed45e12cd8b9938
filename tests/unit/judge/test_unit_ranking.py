"""One rank per hit at evidence-unit level (``covering_metrics``) and one MRR per ranking (``mrr_at_10``).

Hand-worked cases (L3 = log2 3; gold units ev0, ev1; a hit's *new* units are those no earlier hit covered):

1. One hit covering two gold units (grades ev0=2, ev1=1), then two hits covering nothing:
   hit@1 = 1, P@1 = 1, R@1 = 2/2 = 1, nDCG@1 = 2/2 = 1 (ideal@1: the grade-2 unit), MAP@1 = (1/1 x 2)/2 = 1;
   at 3: P@3 = 1/3, R@3 = 1, nDCG@3 = 2 / (2 + 1/L3) = 0.7602 (the hit earns one rank's gain, the ideal
   puts ev1 at rank 2), MAP@3 = 1, MRR@3 = 1. (The old rule gave the hit two ranks: P@3 = 2/4, nDCG = 1.)
2. Two hits covering the same unit ev0, then one covering ev1 (grades 1):
   P@1 = 1, P@2 = 1/2 (the second hit brings nothing new: non-relevant), P@3 = 2/3; R@2 = 1/2, R@3 = 1;
   nDCG@3 = (1 + 1/2) / (1 + 1/L3) = 0.9197; MAP@3 = (1/1 + 2/3) / 2 = 0.8333; MRR = 1.
"""

from __future__ import annotations

import math
import random

import pytest
import pytrec_eval

from ragbench.evidence import EvidenceMatcher, new_units, unit_ranking_of
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.judge.ir import covering_metrics, retrieval_metrics
from ragbench.judge.retrieval import MRR_DEPTH, MRR_KEY, metric_ks, retrieval_scores, scores_from_record
from ragbench.types import Document, Evidence, Hit, Paragraph, Query, Section

L3 = math.log2(3)


def test_one_hit_covering_two_gold_units():
    m = covering_metrics([["ev0", "ev1"], [], ["x"]], {"ev0": 2, "ev1": 1}, [1, 3])
    assert m["hit_at_1"] == 1.0 and m["precision_at_1"] == 1.0 and m["recall_at_1"] == 1.0
    assert m["ndcg_at_1"] == 1.0 and m["map_at_1"] == 1.0 and m["mrr_at_1"] == 1.0
    assert m["precision_at_3"] == pytest.approx(1 / 3) and m["recall_at_3"] == 1.0
    assert m["ndcg_at_3"] == pytest.approx(2 / (2 + 1 / L3)) and round(m["ndcg_at_3"], 4) == 0.7602
    assert m["map_at_3"] == 1.0 and m["mrr_at_3"] == 1.0 and m["mrr"] == 1.0


def test_two_hits_covering_the_same_unit():
    m = covering_metrics([["ev0"], ["ev0"], ["ev1"]], {"ev0": 1, "ev1": 1}, [1, 2, 3])
    assert m["precision_at_1"] == 1.0 and m["precision_at_2"] == 0.5 and m["precision_at_3"] == pytest.approx(2 / 3)
    assert m["recall_at_2"] == 0.5 and m["recall_at_3"] == 1.0
    assert m["ndcg_at_3"] == pytest.approx(1.5 / (1 + 1 / L3)) and round(m["ndcg_at_3"], 4) == 0.9197
    assert m["map_at_3"] == pytest.approx((1 + 2 / 3) / 2) and m["mrr"] == 1.0


def test_a_later_hit_is_relevant_for_the_unit_it_adds():
    # hit 2 covers ev0 (seen) and ev1 (new): relevant, gain = ev1's grade 3
    m = covering_metrics([["ev0"], ["ev0", "ev1"]], {"ev0": 1, "ev1": 3}, [2])
    assert m["precision_at_2"] == 1.0 and m["recall_at_2"] == 1.0
    assert m["ndcg_at_2"] == pytest.approx((1 + 3 / L3) / (3 + 1 / L3))
    assert unit_ranking_of(["a", "b"], [["ev0"], ["ev0", "ev1"]], {"ev0": 1, "ev1": 3}) == ["ev0", "ev1"]
    assert new_units([["ev0"], ["ev0", "ev1"], ["ev1", "ev1"]]) == [["ev0"], ["ev1"], []]


def test_tree_one_paragraph_hit_covering_two_sentence_units():
    """Two evidence sentences of one paragraph, the paragraph retrieved first: one relevant rank, recall 1."""
    doc = Document(doc_id="d", title="D", sections=(Section(title="S", paragraphs=(
        Paragraph("Alice adopted a cat. The cat is called Tom."), Paragraph("Bob bought a red bicycle."))),))
    tree = HierarchicalChunker(search_level="paragraph").chunk([doc])
    query = Query(qid="q", text="?", answers=("x",), question_type="t", doc_ids=("d",),
                  evidence=(Evidence(text="Alice adopted a cat."), Evidence(text="The cat is called Tom.")))
    emap = EvidenceMatcher(tree).match(query)
    assert emap.how == ("exact", "exact")
    hits = [Hit("d#s0.p0", 0.9, 1), Hit("d#s0.p1", 0.8, 2)]
    s = retrieval_scores(tree, emap, hits, [1, 2], 2)
    assert s["retrieval/recall_at_1"] == 1.0 and s["retrieval/precision_at_2"] == 0.5
    assert s["retrieval/ndcg_at_2"] == pytest.approx(1 / (1 + 1 / L3)) and s["retrieval/map_at_2"] == 1.0


def test_covering_metrics_agree_with_pytrec_eval_on_the_one_entry_per_hit_ranking():
    """hit, precision, nDCG and MRR of covering_metrics equal pytrec_eval's on ``unit_ranking_of`` (one entry
    per hit); recall and MAP equal pytrec_eval's whenever no hit brings two new relevant units."""
    rng = random.Random(26)
    ks = [1, 3, 5, 10]
    cut = ",".join(map(str, ks))
    measures = {f"success.{cut}", f"recall.{cut}", f"P.{cut}", f"ndcg_cut.{cut}", f"map_cut.{cut}", "recip_rank"}
    checked = multi = 0
    for n in range(400):
        units = [f"ev{i}" for i in range(rng.randint(1, 5))]
        qrels = {u: rng.choice((0, 1, 1, 2, 3)) for u in units}
        if not any(g >= 1 for g in qrels.values()):
            continue
        hits = [f"c{i}" for i in range(rng.randint(0, 12))]
        covered = [rng.sample(units, min(len(units), rng.choice((0, 0, 1, 1, 2)))) for _ in hits]
        ranking = unit_ranking_of(hits, covered, qrels)
        ours = covering_metrics(covered, qrels, ks)
        run = {f"q{n}": {d: float(len(ranking) - i) for i, d in enumerate(ranking)}}
        ref = pytrec_eval.RelevanceEvaluator({f"q{n}": qrels}, measures).evaluate(run).get(f"q{n}")
        if ref is None:  # an empty run: pytrec_eval reports nothing, covering_metrics 0
            assert not hits and all(v == 0.0 for v in ours.values())
            continue
        one_each = all(sum(qrels[u] >= 1 for u in new) <= 1 for new in new_units(covered))
        multi += not one_each
        for k in ks:
            for mine, trec in (("hit", "success"), ("precision", "P"), ("ndcg", "ndcg_cut")):
                assert ours[f"{mine}_at_{k}"] == pytest.approx(ref[f"{trec}_{k}"], abs=1e-9), (n, mine, k)
            if one_each:
                assert ours[f"recall_at_{k}"] == pytest.approx(ref[f"recall_{k}"], abs=1e-9), (n, k)
                assert ours[f"map_at_{k}"] == pytest.approx(ref[f"map_cut_{k}"], abs=1e-9), (n, k)
        assert ours["mrr"] == pytest.approx(ref["recip_rank"], abs=1e-9), n
        checked += 1
    assert checked > 250 and multi > 30  # both kinds of ranking were exercised


def test_singleton_entries_are_retrieval_metrics():
    ranked = ["a", "b", "c", "d"]
    qrels = {"b": 2, "d": 1, "e": 1}
    assert covering_metrics([[d] for d in ranked], qrels, [1, 3, 4]) == retrieval_metrics(ranked, qrels, [1, 3, 4])


@pytest.mark.parametrize("scorer", ["record", "tree"])
def test_the_same_ranking_gives_one_mrr_at_every_topk(scorer: str):
    """A top-k sweep scores each job's hits down to max(1, 3, 5, 10, top-k): the first relevant hit at
    rank 7 gives MRR@10 = 1/7 at top-k 1, 3, 5, 10 and 20, and no uncut MRR is reported."""
    ranking = [f"c{i}" for i in range(25)]
    covered = [["ev0"] if i == 6 else [] for i in range(25)]
    seen = set()
    for topk in (1, 3, 5, 10, 20):
        ks = metric_ks(topk)
        depth = max(ks)
        assert depth >= MRR_DEPTH
        if scorer == "record":
            s = scores_from_record(ranking[:depth], covered[:depth], {}, {"ev0": 1}, ks, [], [])
        else:
            doc = Document(doc_id="d", title="D", sections=(Section(title="S", paragraphs=tuple(
                Paragraph(f"Sentence number {i} here." if i != 6 else "The cat is called Tom.") for i in range(25))),))
            tree = HierarchicalChunker(search_level="paragraph").chunk([doc])
            emap = EvidenceMatcher(tree).match(Query(qid="q", text="?", answers=("x",), question_type="t",
                                                     doc_ids=("d",), evidence=(Evidence(text="called Tom"),)))
            hits = [Hit(f"d#s0.p{i}", 1.0 - i / 100, i + 1) for i in range(depth)]
            s = retrieval_scores(tree, emap, hits, ks, topk)
        assert "retrieval/mrr" not in s and "retrieval/chunk/mrr" not in s
        seen.add(s[MRR_KEY])
    assert len(seen) == 1 and seen.pop() == pytest.approx(1 / 7)
