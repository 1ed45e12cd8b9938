"""ParagraphAggregator (EasyRAG's two-stage first stage) on a hand-worked tree."""

from __future__ import annotations

import pytest

from ragbench.errors import ConfigError
from ragbench.rerank.aggregate import ParagraphAggregator
from tests.unit.rerank.test_mmr_diversity import QUERY, TREE, _hits, _ids


def test_sentences_merge_into_paragraphs_in_best_member_order() -> None:
    # t4 (p2) first, then t1 (p1), t5 (p2 again), p3 itself (a paragraph hit stands for itself), t2 (p1)
    got = ParagraphAggregator().rerank(QUERY, _hits(["t4", "t1", "t5", "p3", "t2"]), tree=TREE, k=10)
    assert _ids(got) == ["p2", "p1", "p3"]
    assert [h.score for h in got] == [10.0, 9.0, 7.0]  # each paragraph keeps its best member's score
    assert [h.rank for h in got] == [1, 2, 3]


def test_cut_and_levels() -> None:
    hits = _hits(["t4", "t1", "t6"])
    assert _ids(ParagraphAggregator(max_candidates=2).rerank(QUERY, hits, tree=TREE, k=10)) == ["p2", "p1"]
    assert _ids(ParagraphAggregator().rerank(QUERY, hits, tree=TREE, k=1)) == ["p2"]
    assert _ids(ParagraphAggregator(level="section").rerank(QUERY, hits, tree=TREE, k=10)) == ["s1", "s2"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"level": "page"}, "reranker.rerankers.aggregate.level='page' is unknown"),
    ({"max_candidates": 0}, "reranker.rerankers.aggregate.max_candidates=0 is not valid"),
])
def test_bad_config(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ParagraphAggregator(**kwargs)
