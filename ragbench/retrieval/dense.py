"""Dense retrieval with faiss over normalised vectors: exact inner product (``flat``), IVF or HNSW."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragbench.errors import ConfigError, RagbenchError
from ragbench.retrieval.ann_recall import recall_vs_exact
from ragbench.retrieval.vectors import SEARCH_BLOCK_ROWS, SPILL_ROWS, BlockFlatIndex, exact_search
from ragbench.types import Hit
from ragbench.validate import integer

log = logging.getLogger(__name__)

INDEXES = ("flat", "ivf", "hnsw")
# faiss threads for a search call: one. A batched LoCoMo-sized search (120 queries x 700 chunks; 1,986 x
# 18,303) costs 3.7 vs 12.5 and 406-425 vs 653-683 CPU-ms with 1 vs 2 threads on the 2-core machine,
# and no more wall time (docs/configuration.md, "Batched search"); building an HNSW graph keeps faiss's default.
SEARCH_THREADS = 1
# A flat index over more rows than this searches the vectors where they are (memory-mapped) in blocks
# instead of copying them into faiss; the choice depends on the row count alone, so a cold run (vectors
# just encoded) and a warm one (vectors mapped from the cache) search the same way.
FLAT_IN_PLACE_ROWS = SPILL_ROWS
# faiss warns when k-means gets fewer than 39 training points per centroid: fewer lists then.
MIN_POINTS_PER_LIST = 39


def _check(name: str, value: Any, lo: int, hi: int, default: int | None) -> int:
    return integer(f"retrieval.retriever.{name}", value, lo=lo, hi=hi, default=default)


class FaissRetriever:
    """faiss index over the searchable chunks' vectors; scores are cosine similarities.

    ``ivf``: ``nlist`` k-means lists trained on ``train_size`` sampled rows (fewer lists when the corpus
    has under 39 rows per list), ``nprobe`` of them searched. ``hnsw``: ``hnsw_m`` links per node,
    ``ef_construction`` candidates while building, ``ef_search`` while searching."""

    needs_vectors = True

    def __init__(
        self, *, index: str = "flat", hnsw_m: int = 32, ef_construction: int = 200, ef_search: int = 128,
        nlist: int = 1024, nprobe: int = 16, train_size: int = 65_536,
    ) -> None:
        if index not in INDEXES:
            raise ConfigError(f"retrieval.retriever.index={index!r} is not valid; choose one of {list(INDEXES)}")
        self.index_type = index
        self.hnsw_m = _check("hnsw_m", hnsw_m, 2, 256, 32)
        self.ef_construction = _check("ef_construction", ef_construction, 1, 100_000, 200)
        self.ef_search = _check("ef_search", ef_search, 1, 100_000, 128)
        self.nlist = _check("nlist", nlist, 1, 1 << 20, 1024)
        self.nprobe = _check("nprobe", nprobe, 1, self.nlist, 16 if self.nlist >= 16 else None)
        self.train_size = _check("train_size", train_size, 1, 1 << 30, 65_536)
        self._index: Any = None
        self._ids: list[str] = []
        self._vectors: np.ndarray | None = None

    def params(self) -> Mapping[str, Any]:
        p: dict[str, Any] = {"retriever": "faiss", "index": self.index_type}
        if self.index_type == "hnsw":
            p.update(hnsw_m=self.hnsw_m, ef_construction=self.ef_construction, ef_search=self.ef_search)
        elif self.index_type == "ivf":
            p.update(nlist=self.nlist, nprobe=self.nprobe, train_size=self.train_size)
        return p

    def build(self, *, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray | None) -> None:
        """Adds all vectors (read in blocks: a memory-mapped matrix is never copied whole); ``ids[i]``
        names row ``i``."""
        import faiss

        if vectors is None or len(vectors) != len(ids):
            raise RagbenchError("dense retrieval needs one vector per chunk; the pipeline passed none or too few")
        dim = int(vectors.shape[1])
        index: Any
        if self.index_type == "flat" and len(vectors) > FLAT_IN_PLACE_ROWS:
            index = BlockFlatIndex(vectors)
        elif self.index_type == "flat":
            index = faiss.IndexFlatIP(dim)
        elif self.index_type == "ivf":
            index = self._ivf(vectors)
        else:
            index = faiss.IndexHNSWFlat(dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self.ef_construction
            index.hnsw.efSearch = self.ef_search
        if not isinstance(index, BlockFlatIndex):
            for start in range(0, len(vectors), SEARCH_BLOCK_ROWS):
                index.add(np.ascontiguousarray(vectors[start: start + SEARCH_BLOCK_ROWS], dtype=np.float32))
        self._index = index
        self._ids = list(ids)
        self._vectors = vectors

    def _ivf(self, vectors: np.ndarray) -> Any:
        """An untrained-then-trained IVF index: k-means on a fixed sample of rows (seeded: reproducible)."""
        import faiss

        n, dim = vectors.shape
        rows = min(n, self.train_size)
        nlist = max(1, min(self.nlist, rows // MIN_POINTS_PER_LIST))
        if nlist < self.nlist:
            log.info("IVF over %d rows (%d sampled to train): %d lists, not nlist=%d", n, rows, nlist, self.nlist)
        pick = np.sort(np.random.default_rng(0).choice(n, size=rows, replace=False)) if rows < n else slice(None)
        sample = np.ascontiguousarray(vectors[pick], dtype=np.float32)
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.train(sample)
        index.nprobe = min(self.nprobe, nlist)
        return index

    def depth_limit(self, k: int) -> int | None:
        """The deepest search whose top ``k`` equals a search at depth ``k`` (None: any depth). HNSW visits
        ``max(ef_search, depth)`` candidates, so depths up to ``ef_search`` walk the same graph; IVF
        ranks the same probed lists exactly at any depth."""
        if self.index_type != "hnsw":
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

    def ann_recall(self, *, vectors: np.ndarray, hits: Sequence[Sequence[Hit]],
                   ks: Sequence[int]) -> dict[str, float]:
        """``retrieval/ann_recall_at_<k>``: how much of an exact (flat) search's top ``k`` these hits of an
        IVF or HNSW index hold, on the same query vectors; empty for ``flat`` (exact by definition)."""
        if self.index_type == "flat" or self._vectors is None or not len(vectors):
            return {}
        ks = sorted({k for k in ks if k > 0})
        if not ks:
            return {}
        _, rows = self._exact(np.ascontiguousarray(vectors, dtype=np.float32), ks[-1])
        exact = [[self._ids[int(r)] for r in row if r >= 0] for row in rows]
        return recall_vs_exact([[h.chunk_id for h in row] for row in hits], exact, ks)

    def _exact(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import faiss

        assert self._vectors is not None
        before = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(SEARCH_THREADS)
        try:
            return exact_search(self._vectors, queries, k)
        finally:
            faiss.omp_set_num_threads(before)

    def _search(self, queries: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        import faiss

        before = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(SEARCH_THREADS)
        try:
            return self._index.search(queries, depth)
        finally:
            faiss.omp_set_num_threads(before)

    def _cap(self, k: int) -> int:
        """The deepest search that can return more: every row (flat, IVF), HNSW's candidate pool."""
        return len(self._ids) if self.index_type != "hnsw" else max(k, self.ef_search)

    def _probe(self, k: int) -> int:
        """Depth asked of faiss for top ``k``: one more, to see whether the k-th score ties past the cut."""
        return min(k + 1, self._cap(k))

    def _tie_at_cut(self, srow: np.ndarray, irow: np.ndarray, k: int) -> bool:
        return len(srow) > k and irow[k] >= 0 and srow[k] == srow[k - 1]

    def _deeper(self, query: np.ndarray, tie: float, k: int) -> tuple[np.ndarray, np.ndarray]:
        """One query's hits down past every chunk scoring ``tie`` (flat, IVF), or as deep as HNSW's pool."""
        cap = self._cap(k)
        depth = min(2 * k + 1, cap)
        while True:
            scores, rows = self._search(query, depth)
            if depth >= cap or scores[0][-1] < tie or rows[0][-1] < 0:
                return scores[0], rows[0]
            depth = min(2 * depth, cap)
