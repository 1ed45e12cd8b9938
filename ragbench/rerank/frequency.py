"""Frequency (consensus) reranking: EasyRAG's FrequencyReranker.

A candidate retrieved by more of the question's variants (its sub-queries under ``query=rules`` or
``multi_query``) ranks higher; ties keep the incoming (fused) order. ``votes`` maps a chunk id to the
number of variant rankings that held it (``ragbench.query.plan``); a chunk it does not name has 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragbench.types import ChunkTree, Hit, Query


class FrequencyReranker:
    """Orders hits by votes (descending), stable; scores unchanged, ranks renumbered, first ``k`` kept."""

    needs_vectors = False
    needs_votes = True

    def params(self) -> Mapping[str, Any]:
        return {}

    def rerank(
        self,
        query: Query,
        hits: Sequence[Hit],
        *,
        tree: ChunkTree,
        k: int,
        query_vector: np.ndarray | None = None,
        chunk_vectors: Mapping[str, np.ndarray] | None = None,
        votes: Mapping[str, int] | None = None,
    ) -> list[Hit]:
        votes = votes or {}
        ordered = sorted(hits, key=lambda h: -votes.get(h.chunk_id, 1))  # sorted() is stable
        return [Hit(chunk_id=h.chunk_id, score=h.score, rank=r) for r, h in enumerate(ordered[:k], start=1)]
