"""Hybrid retrieval: weighted reciprocal-rank fusion (RRF) over child retrievers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragbench.errors import ConfigError, RagbenchError
from ragbench.protocols import Retriever
from ragbench.types import Hit
from ragbench.validate import integer, real


def rrf_fuse(
    rankings: Sequence[Sequence[Hit]], *, weights: Sequence[float], k_rrf: float, k: int
) -> list[Hit]:
    """Fuse ranked lists: score(id) = sum_i weights[i] / (k_rrf + rank_i(id)); best ``k`` first.

    Ties keep first-seen order, visiting rank 1 of every list, then rank 2, and so on.
    """
    scores: dict[str, float] = {}
    depth = max((len(r) for r in rankings), default=0)
    for pos in range(depth):
        for hits, weight in zip(rankings, weights, strict=True):
            if pos < len(hits):
                hit = hits[pos]
                # Rank by position: children may number ranks from 1 differently, positions never lie.
                scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + weight / (k_rrf + pos + 1)
    ordered = sorted(scores.items(), key=lambda kv: -kv[1])  # stable: ties stay first-seen
    return [Hit(chunk_id=cid, score=s, rank=r) for r, (cid, s) in enumerate(ordered[:k], start=1)]


class RRFRetriever:
    """Reciprocal-rank fusion of children (e.g. dense + BM25), each retrieving ``candidates`` hits."""

    def __init__(
        self,
        *,
        children: Sequence[Retriever],
        weights: Sequence[float] | None = None,
        k_rrf: float = 60,
        candidates: int = 50,
    ) -> None:
        children = list(children)
        if not children:
            raise ConfigError("retrieval.retriever.children is empty; list at least one child retriever")
        for i, child in enumerate(children):
            if not isinstance(child, Retriever):
                raise ConfigError(
                    f"retrieval.retriever.children[{i}] is a {type(child).__name__}, not a retriever; "
                    "give each child a `_target_` such as ragbench.retrieval.bm25.BM25Retriever"
                )
        w = [1.0] * len(children) if weights is None else [float(x) for x in weights]
        if len(w) != len(children) or any(x < 0 for x in w) or not any(x > 0 for x in w):
            raise ConfigError(
                f"retrieval.retriever.weights={w} does not fit {len(children)} children; "
                "give one non-negative weight per child (at least one > 0), or null for equal weights"
            )
        real("retrieval.retriever.k_rrf", k_rrf, lo=0, default=60)  # checked, kept as given (it is in the index key)
        candidates = integer("retrieval.retriever.candidates", candidates, lo=1)
        self.children = children
        self.weights = tuple(w)
        self.k_rrf = k_rrf
        self.candidates = int(candidates)
        self.needs_vectors = any(c.needs_vectors for c in children)

    def params(self) -> Mapping[str, Any]:
        """Fusion settings plus every child's class and params, for the index key."""
        return {
            "k_rrf": self.k_rrf,
            "candidates": self.candidates,
            "weights": list(self.weights),
            "children": [
                {"class": f"{type(c).__module__}.{type(c).__qualname__}", **dict(c.params())}
                for c in self.children
            ],
        }

    def build(self, *, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray | None) -> None:
        """Build every child on the same chunks (vectors go to all; lexical children ignore them)."""
        if self.needs_vectors and vectors is None:
            raise RagbenchError(
                "RRFRetriever.build: a child retriever needs chunk vectors but none were passed; "
                "fix: the pipeline must embed chunks when retriever.needs_vectors is true"
            )
        for child in self.children:
            child.build(ids=ids, texts=texts, vectors=vectors)

    def depth_limit(self, k: int) -> int | None:
        """The deepest search whose fused top ``k`` equals a search at depth ``k``: children retrieve
        ``max(candidates, depth)``, so any depth up to ``candidates`` fuses the same lists."""
        return max(k, self.candidates)

    def search(self, *, texts: Sequence[str], vectors: np.ndarray | None, k: int) -> list[list[Hit]]:
        """Each child retrieves max(candidates, k) per query; the fused top ``k`` are returned."""
        k = integer("retrieval.topk", k, lo=1)
        depth = max(self.candidates, k)
        per_child = [child.search(texts=texts, vectors=vectors, k=depth) for child in self.children]
        for child, res in zip(self.children, per_child, strict=True):
            if len(res) != len(texts):
                raise RagbenchError(
                    f"RRFRetriever: child {type(child).__name__} returned {len(res)} result lists "
                    f"for {len(texts)} queries"
                )
        return [
            rrf_fuse([res[q] for res in per_child], weights=self.weights, k_rrf=self.k_rrf, k=k)
            for q in range(len(texts))
        ]
