"""MMRReranker and DiversityReranker on hand-worked examples over a small chunk tree."""

from __future__ import annotations

import numpy as np
import pytest

from ragbench.errors import ConfigError, RagbenchError
from ragbench.protocols import Reranker
from ragbench.rerank.diversity import DiversityReranker
from ragbench.rerank.mmr import MMRReranker
from ragbench.types import Chunk, ChunkTree, Hit, Level, Query

QUERY = Query(qid="q1", text="what?", answers=("x",), question_type="single_hop")


def _tree() -> ChunkTree:
    """doc d > section s1 > paragraphs p1 (t1 t2 t3), p2 (t4 t5); section s2 > p3 (t6)."""
    c: dict[str, Chunk] = {}

    def add(cid: str, level: Level, parent: str | None, children: tuple[str, ...] = ()) -> None:
        c[cid] = Chunk(chunk_id=cid, doc_id="d", level=level, text=f"text of {cid}", parent_id=parent,
                       children=children)  # fmt: skip

    add("d", Level.DOCUMENT, None, ("s1", "s2"))
    add("s1", Level.SECTION, "d", ("p1", "p2"))
    add("s2", Level.SECTION, "d", ("p3",))
    add("p1", Level.PARAGRAPH, "s1", ("t1", "t2", "t3"))
    add("p2", Level.PARAGRAPH, "s1", ("t4", "t5"))
    add("p3", Level.PARAGRAPH, "s2", ("t6",))
    for t, p in [("t1", "p1"), ("t2", "p1"), ("t3", "p1"), ("t4", "p2"), ("t5", "p2"), ("t6", "p3")]:
        add(t, Level.SENTENCE, p)
    return ChunkTree(chunks=c, search_level=Level.SENTENCE)


TREE = _tree()


def _hits(ids: list[str]) -> list[Hit]:
    return [Hit(chunk_id=c, score=10.0 - i, rank=i + 1) for i, c in enumerate(ids)]


def _ids(hits: list[Hit]) -> list[str]:
    return [h.chunk_id for h in hits]


# ------------------------------------------------------------------ diversity
def test_diversity_quota_per_paragraph() -> None:
    r = DiversityReranker(max_per_parent=2, level="paragraph")
    assert isinstance(r, Reranker) and r.needs_vectors is False
    out = r.rerank(QUERY, _hits(["t1", "t2", "t3", "t4", "t6", "t5"]), tree=TREE, k=10,
                   query_vector=None, chunk_vectors=None)  # fmt: skip
    assert _ids(out) == ["t1", "t2", "t4", "t6", "t5"]  # t3 is p1's third hit
    assert [h.rank for h in out] == [1, 2, 3, 4, 5]
    assert [h.score for h in out] == [10.0, 9.0, 7.0, 6.0, 5.0]  # scores kept


def test_diversity_k_and_section_level_and_quota_one() -> None:
    hits = _hits(["t1", "t4", "t2", "t6", "t5"])
    sec = DiversityReranker(max_per_parent=1, level="section")
    assert _ids(sec.rerank(QUERY, hits, tree=TREE, k=5, query_vector=None, chunk_vectors=None)) == [
        "t1",
        "t6",
    ]
    para = DiversityReranker(max_per_parent=1, level="paragraph")
    assert _ids(para.rerank(QUERY, hits, tree=TREE, k=2, query_vector=None, chunk_vectors=None)) == [
        "t1",
        "t4",
    ]


def test_diversity_hit_at_or_above_level_is_its_own_parent() -> None:
    r = DiversityReranker(max_per_parent=1, level="paragraph")
    out = r.rerank(QUERY, _hits(["p1", "t1", "p2"]), tree=TREE, k=5, query_vector=None, chunk_vectors=None)
    assert _ids(out) == ["p1", "p2"]  # hit p1 counts for paragraph p1, so its sentence t1 is over quota
    assert (r.max_per_parent, r.level) == (1, "paragraph")


def test_diversity_config_errors() -> None:
    with pytest.raises(ConfigError, match="max_per_parent=0"):
        DiversityReranker(max_per_parent=0)
    with pytest.raises(ConfigError, match="level='chapter'"):
        DiversityReranker(level="chapter")


# ------------------------------------------------------------------ mmr
# a and b are duplicates (cos 1); c is less relevant but different. q = e1.
A, B, C = np.array([0.8, 0.6, 0.0]), np.array([0.8, 0.6, 0.0]), np.array([0.6, 0.0, 0.8])
Q = np.array([1.0, 0.0, 0.0])


def _mmr(lam: float, k: int = 3, scale_a: float = 1.0) -> list[Hit]:
    vecs = {"a": A * scale_a, "b": B, "c": C}
    return MMRReranker(lambda_=lam).rerank(QUERY, _hits(["a", "b", "c"]), tree=TREE, k=k,
                                           query_vector=Q, chunk_vectors=vecs)  # fmt: skip


def test_mmr_hand_worked_half() -> None:
    # step 1: .5*.8=.4 (a), .4 (b), .5*.6=.3 (c) -> a; step 2: b .4-.5*1=-.1, c .3-.5*.48=.06 -> c; then b.
    out = _mmr(0.5)
    assert _ids(out) == ["a", "c", "b"]
    assert [h.score for h in out] == pytest.approx([0.4, 0.06, -0.1])
    assert [h.rank for h in out] == [1, 2, 3]


def test_mmr_extremes_k_and_normalisation() -> None:
    assert _ids(_mmr(1.0)) == ["a", "b", "c"]
    assert [h.score for h in _mmr(1.0)] == pytest.approx([0.8, 0.8, 0.6])
    assert _ids(_mmr(0.0)) == ["a", "c", "b"]
    assert [h.score for h in _mmr(0.0)] == pytest.approx([0.0, -0.48, -1.0])
    assert _ids(_mmr(0.5, k=2)) == ["a", "c"]
    assert [h.score for h in _mmr(0.5, scale_a=7.0)] == pytest.approx([0.4, 0.06, -0.1])  # cosine, not dot


def test_mmr_needs_vectors_and_errors() -> None:
    r = MMRReranker(lambda_=0.3)
    assert isinstance(r, Reranker) and r.needs_vectors is True and r.lambda_ == 0.3
    assert r.rerank(QUERY, [], tree=TREE, k=3, query_vector=Q, chunk_vectors={}) == []
    with pytest.raises(RagbenchError, match="needs the query and chunk vectors"):
        r.rerank(QUERY, _hits(["a"]), tree=TREE, k=3, query_vector=None, chunk_vectors=None)
    with pytest.raises(RagbenchError, match=r"no vector for chunk\(s\) \['b'\]"):
        r.rerank(QUERY, _hits(["a", "b"]), tree=TREE, k=3, query_vector=Q, chunk_vectors={"a": A})
    with pytest.raises(ConfigError, match="lambda_=1.5"):
        MMRReranker(lambda_=1.5)
