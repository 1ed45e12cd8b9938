"""Diversity reranking: at most ``max_per_parent`` hits per parent chunk (EasyRAG's DiversityReranker)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ragbench.errors import ConfigError
from ragbench.types import ChunkTree, Hit, Level, Query
from ragbench.validate import integer

LEVELS = tuple(level.name.lower() for level in Level)


class DiversityReranker:
    """Keeps hits in order but drops any beyond ``max_per_parent`` under the same ``level`` ancestor."""

    needs_vectors = False
    needs_votes = False

    def __init__(self, *, max_per_parent: int = 2, level: str = "paragraph") -> None:
        max_per_parent = integer("reranker.rerankers.diversity.max_per_parent", max_per_parent, lo=1)
        if level not in LEVELS:
            raise ConfigError(
                f"reranker.rerankers.diversity.level='{level}' is unknown; use one of {list(LEVELS)}"
            )
        self.max_per_parent = int(max_per_parent)
        self.level = level
        self._level = Level[level.upper()]

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
        """The first ``k`` hits that keep each parent under its quota; scores unchanged, ranks renumbered."""
        per_parent: dict[str, int] = {}
        kept: list[Hit] = []
        for hit in hits:
            if len(kept) >= k:
                break
            # A hit at or above `level` is its own parent: ancestor() returns the chunk itself.
            parent = tree.ancestor(hit.chunk_id, self._level).chunk_id
            if per_parent.get(parent, 0) >= self.max_per_parent:
                continue
            per_parent[parent] = per_parent.get(parent, 0) + 1
            kept.append(Hit(chunk_id=hit.chunk_id, score=hit.score, rank=len(kept) + 1))
        return kept
