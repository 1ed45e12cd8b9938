"""Paragraph candidate aggregation: the first stage of EasyRAG's two-stage chain
(ParagraphCandidateAggregator): sentence hits are merged into their paragraph, so the final rerank
(a cross-encoder, MMR) scores whole paragraphs once each.

Each hit is replaced by its ancestor at ``level`` (a hit at or above ``level`` stands for itself);
a paragraph ranks where its best member ranked and keeps that member's score (the fused RRF score,
comparable across members), and it is kept once. At most ``max_candidates`` paragraphs go on
(EasyRAG hands 30 to its cross-encoder). Retrieval metrics after it are computed on the paragraphs:
evidence-unit metrics count a paragraph that contains the evidence; chunk-level ``retrieval/chunk/*``
metrics only know the searched levels (search paragraphs too with ``retrieval.parent_vectors=mean``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragbench.errors import ConfigError
from ragbench.rerank.diversity import LEVELS
from ragbench.types import ChunkTree, Hit, Level, Query
from ragbench.validate import integer


class ParagraphAggregator:
    """Sentence hits -> distinct ``level`` candidates, in the order of their best member."""

    needs_vectors = False
    needs_votes = False

    def __init__(self, *, level: str = "paragraph", max_candidates: int = 30) -> None:
        if level not in LEVELS:
            raise ConfigError(f"reranker.rerankers.aggregate.level='{level}' is unknown; use one of {list(LEVELS)}")
        max_candidates = integer("reranker.rerankers.aggregate.max_candidates", max_candidates, lo=1, default=30)  # EasyRAG: 30
        self.level = level
        self._level = Level[level.upper()]
        self.max_candidates = max_candidates

    def params(self) -> Mapping[str, Any]:
        return {"level": self.level, "max_candidates": self.max_candidates}

    def rerank(
        self,
        query: Query,
        hits: Sequence[Hit],
        *,
        tree: ChunkTree,
        k: int,
        query_vector: np.ndarray | None = None,
        chunk_vectors: Mapping[str, np.ndarray] | None = None,
    ) -> list[Hit]:
        best: dict[str, float] = {}
        for hit in hits:
            target = tree.ancestor(hit.chunk_id, self._level).chunk_id  # itself at or above ``level``
            best.setdefault(target, hit.score)  # hits arrive best first: the first member is the best
        cut = min(k, self.max_candidates)
        return [Hit(chunk_id=cid, score=s, rank=r) for r, (cid, s) in enumerate(list(best.items())[:cut], start=1)]
