"""Evidence -> chunk relevance (id, exact, soft, unmatched), evidence-unit ranking, and expansion."""

from __future__ import annotations

import math

import pytest

from ragbench.errors import ConfigError
from ragbench.evidence import (
    EvidenceMatcher,
    evidence_text_recall,
    relevant_searchable,
    soft_match,
    unit_ranking,
)
from ragbench.expand import ParentExpander
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.judge.ir import retrieval_metrics
from ragbench.judge.retrieval import retrieval_scores
from ragbench.types import Document, Evidence, Hit, Level, Paragraph, Query, Section

DOC = Document(doc_id="d", title="Doc", sections=(
    Section(title="S1", paragraphs=(
        Paragraph("Alice adopted a cat. The cat is called Tom.", ref="D1:1"),
        Paragraph("Bob bought a red bicycle last spring.", ref="D1:2"),
    )),
    Section(title="S2", paragraphs=(
        Paragraph("The conference was held in Lisbon in May 2023.", ref="D2:1"),
    )),
))
TREE = HierarchicalChunker().chunk([DOC])  # sentences: s0.p0.t0, s0.p0.t1, s0.p1.t0, s1.p0.t0


def q(*evidence):
    return Query(qid="q", text="?", answers=("x",), question_type="t", evidence=tuple(evidence), doc_ids=("d",))


def test_id_evidence_maps_to_the_turns_sentences():
    emap = EvidenceMatcher(TREE).match(q(Evidence(ref="D1:1")))
    assert emap.how == ("id",)
    assert relevant_searchable(TREE, emap) == {"d#s0.p0.t0": 1, "d#s0.p0.t1": 1}


def test_text_evidence_exact_then_soft_then_unmatched():
    matcher = EvidenceMatcher(TREE)
    exact = matcher.match(q(Evidence(text="the CAT is called tom")))
    assert exact.how == ("exact",) and exact.anchors == (("d#s0.p0.t1",),)
    # 5 of 6 evidence tokens present (0.83 >= 0.8): soft match on the bicycle sentence
    soft = matcher.match(q(Evidence(text="Bob bought a blue bicycle last spring")))
    assert soft.how == ("soft",) and soft.anchors == (("d#s0.p1.t0",),)
    # short evidence never matches softly; unmatched is reported, not dropped
    none = matcher.match(q(Evidence(text="green car"), Evidence(ref="D9:9")))
    assert none.how == ("unmatched", "unmatched") and none.matched == []


def test_soft_match_rule():
    assert soft_match("held in Lisbon", "The conference was held in Lisbon.")
    assert not soft_match("held in Porto", "The conference was held in Lisbon.")  # 3 tokens: exact only
    assert soft_match("one two three four five", "one two three four six")  # 4/5 = 0.8
    assert not soft_match("one two three four five", "one two three six seven")  # 3/5
    assert evidence_text_recall(["held in Lisbon", "green car"], ["The conference was held in Lisbon."]) == 0.5
    assert evidence_text_recall([], ["x"]) is None


def test_evidence_unit_metrics_hand_worked():
    # two evidence turns; hits: a non-relevant sentence, then both sentences of turn D1:1, then D2:1
    emap = EvidenceMatcher(TREE).match(q(Evidence(ref="D1:1"), Evidence(ref="D2:1")))
    hits = [Hit("d#s0.p1.t0", 0.9, 1), Hit("d#s0.p0.t0", 0.8, 2), Hit("d#s0.p0.t1", 0.7, 3),
            Hit("d#s1.p0.t0", 0.6, 4)]
    units, qrels = unit_ranking(TREE, emap, hits)
    # the second D1:1 sentence adds no new unit: it keeps its rank as a non-relevant entry
    assert units == ["d#s0.p1.t0", "ev0", "d#s0.p0.t1", "ev1"]
    assert qrels == {"ev0": 1, "ev1": 1}
    m = retrieval_metrics(units, qrels, [3])
    assert m["mrr"] == 0.5 and m["recall_at_3"] == 0.5 and m["hit_at_3"] == 1.0
    s = retrieval_scores(TREE, emap, hits, [3, 4], 4)
    assert s["retrieval/recall_at_4"] == 1.0 and s["retrieval/precision_at_4"] == 0.5
    # at chunk level the same hits: relevant = 3 sentences, all retrieved in the top 4
    chunk = retrieval_metrics([h.chunk_id for h in hits], relevant_searchable(TREE, emap), [1, 4])
    assert chunk["hit_at_1"] == 0.0 and chunk["recall_at_4"] == 1.0 and chunk["precision_at_4"] == 0.75


def test_parent_depth_is_the_target_level_and_merges():
    hits = [Hit("d#s0.p0.t1", 0.9, 1), Hit("d#s0.p0.t0", 0.8, 2), Hit("d#s1.p0.t0", 0.7, 3)]
    ctx0 = ParentExpander(parent_depth=0).expand(hits, TREE)
    assert [c.chunk_id for c in ctx0] == ["d#s0.p0.t1", "d#s0.p0.t0", "d#s1.p0.t0"]
    ctx1 = ParentExpander(parent_depth=1).expand(hits, TREE)
    assert [c.chunk_id for c in ctx1] == ["d#s0.p0", "d#s1.p0"]
    assert ctx1[0].hit_ids == ("d#s0.p0.t1", "d#s0.p0.t0")  # every triggering hit kept
    assert ctx1[0].level == Level.PARAGRAPH and ctx1[0].title == "Doc > S1"
    ctx2 = ParentExpander(parent_depth=2).expand(hits, TREE)
    assert [c.chunk_id for c in ctx2] == ["d#s0", "d#s1"]
    # a paragraph-level hit with parent_depth=1 stays a paragraph (never one level too high)
    assert ParentExpander(parent_depth=1).expand([Hit("d#s0.p1", 1.0, 1)], TREE)[0].chunk_id == "d#s0.p1"


def test_context_budget_cuts_at_sentence_boundaries():
    hits = [Hit("d#s0.p0.t0", 0.9, 1), Hit("d#s1.p0.t0", 0.8, 2)]
    ctx = ParentExpander(parent_depth=2, max_context_tokens=6).expand(hits, TREE)
    assert len(ctx) == 1 and ctx[0].truncated
    assert ctx[0].text == "Alice adopted a cat."  # the next sentence would exceed 6 tokens
    with pytest.raises(ConfigError, match="parent_depth"):
        ParentExpander(parent_depth=5)


def test_per_context_char_cap_cuts_each_context_and_keeps_the_next():
    """expander.max_context_chars (issue 44 item 5): each context keeps its first n characters, as the
    benchmark suite cuts each block; unlike the total token cap, the next contexts still come."""
    hits = [Hit("d#s0.p0.t0", 0.9, 1), Hit("d#s1.p0.t0", 0.8, 2)]
    full = ParentExpander(parent_depth=2).expand(hits, TREE)
    cut = ParentExpander(parent_depth=2, max_context_chars=10).expand(hits, TREE)
    assert [c.chunk_id for c in cut] == [c.chunk_id for c in full] and len(cut) == 2
    assert [c.text for c in cut] == [c.text[:10] for c in full]
    assert all(c.truncated == (len(f.text) > 10) for c, f in zip(cut, full, strict=True))
    roomy = ParentExpander(parent_depth=2, max_context_chars=10_000).expand(hits, TREE)
    assert [c.text for c in roomy] == [c.text for c in full] and not any(c.truncated for c in roomy)
    # both caps: the total still ends the list, and no context is longer than the per-context cap
    both = ParentExpander(parent_depth=2, max_context_chars=40, max_context_tokens=6).expand(hits, TREE)
    assert len(both) == 1 and both[0].truncated and both[0].text == "Alice adopted a cat."
    fits = ParentExpander(parent_depth=2, max_context_chars=12, max_context_tokens=6).expand(hits, TREE)
    assert [c.text for c in fits] == [c.text[:12] for c in full]  # 3 + 3 tokens: both fit the total
    for bad in (0, -1, 2.5, True, "8000"):
        with pytest.raises(ConfigError, match="max_context_chars must be an integer >= 1"):
            ParentExpander(max_context_chars=bad)


# --------------------------------------------------------------- child_depth (aggregate downwards)
SECTION_HITS = [Hit("d#s0.p1.t0", 0.9, 1), Hit("d#s1.p0.t0", 0.8, 2)]


def test_child_depth_zero_keeps_the_whole_target():
    ctx = ParentExpander(parent_depth=2, child_depth=0).expand(SECTION_HITS, TREE)
    assert [c.text for c in ctx] == [TREE["d#s0"].text, TREE["d#s1"].text]
    assert all(c.part_ids == () for c in ctx)


def test_child_depth_one_keeps_only_the_hit_paragraphs_under_the_section_title():
    ctx = ParentExpander(parent_depth=2, child_depth=1).expand(SECTION_HITS, TREE)
    assert [c.chunk_id for c in ctx] == ["d#s0", "d#s1"]
    # S1 had two paragraphs; only the bicycle paragraph was hit, so the cat paragraph is left out
    assert ctx[0].text == "S1\nBob bought a red bicycle last spring."
    assert ctx[0].part_ids == ("d#s0.p1",) and ctx[0].level == Level.SECTION
    # S2's only paragraph was hit: every child kept renders exactly the section's own text
    assert ctx[1].text == TREE["d#s1"].text and ctx[1].part_ids == ("d#s1.p0",)


def test_child_depth_keeps_parts_in_document_order_and_every_hit_id():
    hits = [Hit("d#s0.p1.t0", 0.9, 1), Hit("d#s0.p0.t1", 0.8, 2)]  # later paragraph ranked first
    ctx = ParentExpander(parent_depth=2, child_depth=2).expand(hits, TREE)
    assert len(ctx) == 1 and ctx[0].hit_ids == ("d#s0.p1.t0", "d#s0.p0.t1")
    assert ctx[0].part_ids == ("d#s0.p0.t1", "d#s0.p1.t0")
    # sentences of one paragraph join by spaces, paragraphs by lines, under the section title
    assert ctx[0].text == "S1\nThe cat is called Tom.\nBob bought a red bicycle last spring."


def test_child_depth_beyond_sentences_stops_at_sentences_and_coarse_hits_stay_whole():
    deep = ParentExpander(parent_depth=1, child_depth=3)
    assert deep.unit_level == Level.SENTENCE
    ctx = deep.expand([Hit("d#s0.p0.t1", 1.0, 1)], TREE)
    assert ctx[0].chunk_id == "d#s0.p0" and ctx[0].text == "The cat is called Tom."
    # a paragraph hit (paragraph search) at parent_depth=2, child_depth=2: the paragraph is whole
    ctx = ParentExpander(parent_depth=2, child_depth=2).expand([Hit("d#s0.p0", 1.0, 1)], TREE)
    assert ctx[0].text == "S1\nAlice adopted a cat. The cat is called Tom."
    # a section hit (parent vectors searched) keeps the whole section whatever child_depth says
    ctx = ParentExpander(parent_depth=1, child_depth=1).expand([Hit("d#s0", 1.0, 1)], TREE)
    assert ctx[0].text == TREE["d#s0"].text and ctx[0].part_ids == ()


def test_document_target_with_child_depth_keeps_the_hit_sections():
    ctx = ParentExpander(parent_depth=3, child_depth=1).expand([Hit("d#s1.p0.t0", 1.0, 1)], TREE)
    assert ctx[0].chunk_id == "d" and ctx[0].part_ids == ("d#s1",)
    assert ctx[0].text == "Doc\n\n" + TREE["d#s1"].text


def test_child_depth_budget_cuts_within_the_kept_parts():
    ctx = ParentExpander(parent_depth=2, child_depth=1, max_context_tokens=4).expand(
        [Hit("d#s0.p0.t1", 1.0, 1)], TREE)
    assert ctx[0].truncated and ctx[0].text == "Alice adopted a cat."
    with pytest.raises(ConfigError, match="child_depth"):
        ParentExpander(child_depth=-1)


def test_citation_check_uses_the_kept_parts():
    from ragbench.evidence import context_has_evidence

    emap = EvidenceMatcher(TREE).match(q(Evidence(ref="D1:1")))  # evidence: the cat paragraph
    whole, = ParentExpander(parent_depth=2).expand([Hit("d#s0.p1.t0", 1.0, 1)], TREE)
    pruned, = ParentExpander(parent_depth=2, child_depth=1).expand([Hit("d#s0.p1.t0", 1.0, 1)], TREE)
    assert context_has_evidence(TREE, emap, whole)  # the whole section holds the cat paragraph
    assert not context_has_evidence(TREE, emap, pruned)  # the bicycle paragraph alone does not


def test_evidence_unit_metrics_cut_at_k_not_at_the_unit_list():
    """Five hits on one of two relevant turns: standard nDCG@5 = 1 / (1 + 1/log2 3) = 0.613, P@5 = 1/5,
    recall@5 = 1/2 (the de-duplicated unit list once gave nDCG@5 = P@5 = 1.0)."""
    tree = HierarchicalChunker().chunk([Document(doc_id="d", title="D", sections=(Section(title="S", paragraphs=(
        Paragraph("One. Two. Three. Four. Five.", ref="T1"), Paragraph("Other turn.", ref="T2"))),))])
    emap = EvidenceMatcher(tree).match(q(Evidence(ref="T1"), Evidence(ref="T2")))
    sentences = [c.chunk_id for c in tree.at_level(Level.SENTENCE) if "T1" in tree[c.parent_id].refs]
    assert len(sentences) == 5
    hits = [Hit(cid, 1.0 - i / 10, i + 1) for i, cid in enumerate(sentences)]
    s = retrieval_scores(tree, emap, hits, [5], 5)
    assert s["retrieval/ndcg_at_5"] == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert round(s["retrieval/ndcg_at_5"], 3) == 0.613
    assert s["retrieval/precision_at_5"] == pytest.approx(0.2)
    assert s["retrieval/recall_at_5"] == 0.5 and s["retrieval/hit_at_5"] == 1.0
    assert s["retrieval/map_at_5"] == pytest.approx(0.5) and s["retrieval/mrr_at_5"] == 1.0
    assert "retrieval/mrr" not in s  # MRR only at its cut-offs


def test_cjk_quote_soft_rule_is_the_same_in_soft_match_and_the_matcher():
    # an 8-character Chinese quote, 7 of whose characters are in the paragraph (0.875), not a substring
    paragraph, quote = "会议于五月在里斯本举行。", "会议五月在里斯办"
    doc = Document(doc_id="zh", title="文", sections=(Section(title="一", paragraphs=(Paragraph(paragraph),)),))
    emap = EvidenceMatcher(HierarchicalChunker().chunk([doc])).match(
        Query(qid="q", text="?", answers=("x",), question_type="t", evidence=(Evidence(text=quote),),
              doc_ids=("zh",)))
    assert soft_match(quote, paragraph)
    assert emap.how == ("soft",) and emap.matched == [0]
    assert not soft_match("会议五月在伦敦办", paragraph)  # 5/8: neither rule matches
    miss = EvidenceMatcher(HierarchicalChunker().chunk([doc])).match(
        Query(qid="q", text="?", answers=("x",), question_type="t", evidence=(Evidence(text="会议五月在伦敦办"),),
              doc_ids=("zh",)))
    assert miss.how == ("unmatched",)


def _unit_metrics_by_definition(ranked, covered, qrels, ks):
    """``retrieval/<m>_at_k`` as the README defines them, one rank per hit: hit, precision, nDCG and MRR are
    trec_eval's (``retrieval_metrics``, checked against pytrec_eval) on the unit ranking of the first k hits
    (one entry per hit); recall = distinct relevant units the first k hits cover / relevant units; MAP =
    sum over relevant hits of precision at the hit's rank x the relevant units it newly covers / relevant
    units."""
    from ragbench.evidence import new_units, unit_ranking_of

    out = {}
    num_rel = sum(g >= 1 for g in qrels.values())
    for k in ks:
        units = unit_ranking_of(ranked[:k], covered[:k], qrels)
        assert len(units) == len(ranked[:k])  # one entry per hit
        trec = retrieval_metrics(units, qrels, [k])
        new = [sum(qrels.get(u, 0) >= 1 for u in n) for n in new_units(covered[:k])]
        rel = [n > 0 for n in new]
        ap = sum(n * sum(rel[: i + 1]) / (i + 1) for i, n in enumerate(new) if n)
        values = {"hit": trec[f"hit_at_{k}"], "recall": sum(new) / num_rel if num_rel else 0.0,
                  "precision": trec[f"precision_at_{k}"], "ndcg": trec[f"ndcg_at_{k}"],
                  "map": ap / num_rel if num_rel else 0.0, "mrr": trec[f"mrr_at_{k}"]}
        out.update({f"retrieval/{m}_at_{k}": v for m, v in values.items()})
    return out


def test_unit_metrics_from_one_ranking_equal_the_per_k_definition():
    """scores_from_record scores the evidence units once over all hits and reads each k: over 3,000 random
    cases (short lists, hits covering several units, repeats, empty lists) every value equals the per-k
    definition."""
    import random

    from ragbench.judge.retrieval import scores_from_record

    rng = random.Random(7)
    for _ in range(3000):
        n_units = rng.randint(0, 4)
        ranked = [f"c{i}" for i in rng.sample(range(30), rng.randint(0, 12))]
        covered = [[f"ev{rng.randrange(n_units)}" for _ in range(rng.choice((0, 0, 1, 1, 2, 3)))] if n_units else []
                   for _ in ranked]
        qrels = {f"ev{i}": rng.choice((1, 1, 2)) for i in range(n_units) if rng.random() < 0.8}
        ks = sorted({*rng.sample(range(1, 15), rng.randint(1, 4))})
        got = scores_from_record(ranked, covered, {}, qrels, ks, [], [])
        want = _unit_metrics_by_definition(ranked, covered, qrels, ks)
        unit = {k: v for k, v in got.items() if not k.startswith("retrieval/chunk/")}
        assert unit.keys() == want.keys()
        for key, value in want.items():
            assert unit[key] == pytest.approx(value, abs=1e-12), key


def test_hit_units_is_covers_for_every_hit_and_evidence_item():
    from ragbench.evidence import covers, hit_units

    emap = EvidenceMatcher(TREE).match(q(Evidence(ref="D1:1"), Evidence(text="red bicycle"), Evidence(ref="none"),
                                         Evidence(ref="D2:1")))
    hits = [Hit(cid, 0.0, i + 1) for i, cid in enumerate(TREE.chunks)]  # every level: inside and containing
    want = [[f"ev{i}" for i, a in enumerate(emap.anchors) if a and covers(TREE, h.chunk_id, a)] for h in hits]
    assert hit_units(TREE, emap, hits) == want
    assert max(map(len, want)) == 3 and min(map(len, want)) == 1  # the document covers all three matched items


def test_a_kept_coverage_gives_the_scores_of_a_fresh_one_across_jobs():
    """The jobs of a sweep share one Coverage per query: the same hits at the same cut-offs take the
    ranking's scores computed once, other cut-offs and hits are computed, and every value equals the one
    a fresh computation gives; at most RANKINGS_KEPT rankings are kept per query."""
    from ragbench.evidence import RANKINGS_KEPT, Coverage

    emap = EvidenceMatcher(TREE).match(q(Evidence(ref="D1:1"), Evidence(ref="D2:1")))
    cov = Coverage(TREE, emap)
    ids = list(TREE.chunks)
    jobs = [([ids[5], ids[1], ids[7]], [1, 3, 5], 3), ([ids[5], ids[1], ids[7]], [1, 3, 5], 5),
            ([ids[5], ids[1], ids[7], ids[2]], [1, 3, 5, 10], 10), ([ids[0]], [1, 3, 5], 3),
            ([ids[5], ids[1], ids[7]], [1, 3, 5], 3)]
    for ranked, ks, topk in jobs * 2:
        hits = [Hit(c, 1.0 - i / 10, i + 1) for i, c in enumerate(ranked)]
        assert retrieval_scores(TREE, emap, hits, ks, topk, cov) == retrieval_scores(TREE, emap, hits, ks, topk)
    assert len(cov._ranking) <= RANKINGS_KEPT
