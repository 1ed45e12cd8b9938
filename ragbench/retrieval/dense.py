"""Dense retrieval with faiss: exact inner product (``flat``) or HNSW over normalised vectors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragbench.errors import ConfigError, RagbenchError
from ragbench.types import Hit

INDEXES = ("flat", "hnsw")


class FaissRetriever:
    """faiss index over the searchable chunks' vectors; scores are cosine similarities."""

    needs_vectors = True

    def __init__(
        self, *, index: str = "flat", hnsw_m: int = 32, ef_construction: int = 200, ef_search: int = 128
    ) -> None:
        if index not in INDEXES:
            raise ConfigError(f"retrieval.retriever.index={index!r} is not valid; choose one of {list(INDEXES)}")
        self.index_type = index
        self.hnsw_m = hnsw_m
        self.ef_construction = ef_construction
        self.ef_search = ef_search
        self._index: Any = None
        self._ids: list[str] = []

    def params(self) -> Mapping[str, Any]:
        p: dict[str, Any] = {"retriever": "faiss", "index": self.index_type}
        if self.index_type == "hnsw":
            p.update(hnsw_m=self.hnsw_m, ef_construction=self.ef_construction, ef_search=self.ef_search)
        return p

    def build(self, *, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray | None) -> None:
        """Adds all vectors; ``ids[i]`` names row ``i``."""
        import faiss

        if vectors is None or len(vectors) != len(ids):
            raise RagbenchError("dense retrieval needs one vector per chunk; the pipeline passed none or too few")
        dim = int(vectors.shape[1])
        index: Any
        if self.index_type == "flat":
            index = faiss.IndexFlatIP(dim)
        else:
            index = faiss.IndexHNSWFlat(dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self.ef_construction
            index.hnsw.efSearch = self.ef_search
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        self._index = index
        self._ids = list(ids)

    def search(self, *, texts: Sequence[str], vectors: np.ndarray | None, k: int) -> list[list[Hit]]:
        """Top ``k`` hits per query, best first."""
        if self._index is None:
            raise RagbenchError("FaissRetriever.search called before build()")
        if vectors is None:
            raise RagbenchError("dense retrieval needs query vectors; the pipeline passed none")
        k = min(k, len(self._ids))
        if k <= 0 or len(vectors) == 0:
            return [[] for _ in range(len(vectors))]
        scores, rows = self._index.search(np.ascontiguousarray(vectors, dtype=np.float32), k)
        out: list[list[Hit]] = []
        for srow, irow in zip(scores, rows, strict=True):
            hits = [
                Hit(chunk_id=self._ids[i], score=float(s), rank=r + 1)
                for r, (s, i) in enumerate((s, i) for s, i in zip(srow, irow, strict=True) if i >= 0)
            ]
            out.append(hits)
        return out
