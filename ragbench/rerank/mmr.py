"""Maximal marginal relevance (MMR) reranking on normalised embedding vectors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ragbench.errors import ConfigError, RagbenchError
from ragbench.types import ChunkTree, Hit, Query


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Each row (or the vector) scaled to length 1; a zero row stays zero."""
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def check_lambda(option: str, lambda_: float) -> float:
    """An MMR trade-off ``reranker.rerankers.<option>.lambda_`` in [0, 1]; a ConfigError naming it otherwise."""
    if not 0.0 <= lambda_ <= 1.0:
        raise ConfigError(
            f"reranker.rerankers.{option}.lambda_={lambda_} is out of range; use 0 <= lambda_ <= 1 "
            "(1 = pure relevance, 0 = pure diversity)"
        )
    return float(lambda_)


class MMRReranker:
    """Greedy MMR: pick argmax of lambda_ * cos(q, d) - (1 - lambda_) * max cos(d, picked)."""

    needs_vectors = True
    needs_votes = False

    def __init__(self, *, lambda_: float = 0.5) -> None:
        self.lambda_ = check_lambda("mmr", lambda_)

    def rerank(
        self,
        query: Query,
        hits: Sequence[Hit],
        *,
        tree: ChunkTree,
        k: int,
        query_vector: np.ndarray | None,
        chunk_vectors: Mapping[str, np.ndarray] | None,
    ) -> list[Hit]:
        """The first ``k`` hits in MMR order; each hit's score is its MMR value when picked."""
        if not hits or k < 1:
            return []
        if query_vector is None or chunk_vectors is None:
            raise RagbenchError(
                f"MMRReranker needs the query and chunk vectors (query {query.qid}); "
                "fix: the pipeline must pass vectors when reranker.needs_vectors is true"
            )
        missing = [h.chunk_id for h in hits if h.chunk_id not in chunk_vectors]
        if missing:
            raise RagbenchError(
                f"MMRReranker: no vector for chunk(s) {missing[:3]} (query {query.qid}); "
                "fix: the pipeline must pass vectors for every hit"
            )
        docs = unit_rows(np.stack([np.asarray(chunk_vectors[h.chunk_id], dtype=np.float64) for h in hits]))
        q = unit_rows(np.asarray(query_vector, dtype=np.float64).reshape(-1))
        relevance = docs @ q
        pairwise = docs @ docs.T
        n = min(k, len(hits))
        lam = self.lambda_
        picked: list[int] = []
        picked_scores: list[float] = []
        # Highest similarity of every candidate to anything picked so far (None before the first pick).
        redundancy: np.ndarray | None = None
        free = np.ones(len(hits), dtype=bool)
        for _ in range(n):
            value = lam * relevance if redundancy is None else lam * relevance - (1.0 - lam) * redundancy
            value = np.where(free, value, -np.inf)
            best = int(np.argmax(value))  # first index wins ties: retrieval order breaks them
            picked.append(best)
            picked_scores.append(float(value[best]))
            free[best] = False
            redundancy = pairwise[best] if redundancy is None else np.maximum(redundancy, pairwise[best])
        return [
            Hit(chunk_id=hits[i].chunk_id, score=s, rank=r)
            for r, (i, s) in enumerate(zip(picked, picked_scores, strict=True), start=1)
        ]
