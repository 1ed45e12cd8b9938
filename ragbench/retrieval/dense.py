"""Dense retrieval with faiss: exact inner product (``flat``) or HNSW over normalised vectors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragbench.errors import ConfigError, RagbenchError
from ragbench.types import Hit

INDEXES = ("flat", "hnsw")
# faiss threads for a search call: one. A batched LoCoMo-sized search (120 queries x 700 chunks; 1,986 x
# 18,303) costs 3.7 vs 12.5 and 406-425 vs 653-683 CPU-ms with 1 vs 2 threads on the 2-core machine,
# and no more wall time (README "Batched search"); building an HNSW graph keeps faiss's default.
SEARCH_THREADS = 1


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

    def depth_limit(self, k: int) -> int | None:
        """The deepest search whose top ``k`` equals a search at depth ``k`` (None: any depth). HNSW visits
        ``max(ef_search, depth)`` candidates, so depths up to ``ef_search`` walk the same graph."""
        if self.index_type == "flat":
            return None
        return max(k, self.ef_search - 1)  # search() asks one deeper to see a tie at the cut

    def search(self, *, texts: Sequence[str], vectors: np.ndarray | None, k: int) -> list[list[Hit]]:
        """Top ``k`` hits per query, best first; equal scores in row order (so the top ``k`` of a deeper
        search is the top ``k`` of this one: one search serves every top-k of a sweep)."""
        if self._index is None:
            raise RagbenchError("FaissRetriever.search called before build()")
        if vectors is None:
            raise RagbenchError("dense retrieval needs query vectors; the pipeline passed none")
        k = min(k, len(self._ids))
        if k <= 0 or len(vectors) == 0:
            return [[] for _ in range(len(vectors))]
        queries = np.ascontiguousarray(vectors, dtype=np.float32)
        scores, rows = self._search(queries, self._probe(k))
        out: list[list[Hit]] = []
        for q, (srow, irow) in enumerate(zip(scores, rows, strict=True)):
            if self._tie_at_cut(srow, irow, k):  # a tie may reach past the probe: look deeper for this query
                srow, irow = self._deeper(queries[q: q + 1], srow[k - 1], k)
            keep = irow >= 0
            srow, irow = srow[keep], irow[keep]
            order = np.lexsort((irow, -srow))[:k]  # score descending, then row ascending
            out.append([Hit(chunk_id=self._ids[int(irow[i])], score=float(srow[i]), rank=r + 1)
                        for r, i in enumerate(order)])
        return out

    def _search(self, queries: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        import faiss

        before = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(SEARCH_THREADS)
        try:
            return self._index.search(queries, depth)
        finally:
            faiss.omp_set_num_threads(before)

    def _probe(self, k: int) -> int:
        """Depth asked of faiss for top ``k``: one more, to see whether the k-th score ties past the cut."""
        cap = len(self._ids) if self.index_type == "flat" else max(k, self.ef_search)
        return min(k + 1, cap)

    def _tie_at_cut(self, srow: np.ndarray, irow: np.ndarray, k: int) -> bool:
        return len(srow) > k and irow[k] >= 0 and srow[k] == srow[k - 1]

    def _deeper(self, query: np.ndarray, tie: float, k: int) -> tuple[np.ndarray, np.ndarray]:
        """One query's hits down past every chunk scoring ``tie`` (flat), or as deep as HNSW's pool."""
        cap = len(self._ids) if self.index_type == "flat" else max(k, self.ef_search)
        depth = min(2 * k + 1, cap)
        while True:
            scores, rows = self._search(query, depth)
            if depth >= cap or scores[0][-1] < tie or rows[0][-1] < 0:
                return scores[0], rows[0]
            depth = min(2 * depth, cap)
