"""How the pipeline searches: one retriever call per batch of queries, at one depth for every top-k.

Batching: in corpus scope all queries go to the retriever in one call; in document scope, one call
per document set (``DocumentScope.search_many``). A query's ``latency/search_*`` is its batch's wall
time divided by the batch's size; ``latency/search_single_*`` times up to ``SINGLE_SAMPLE`` queries
searched one by one afterwards (a sample, so per-query latency is still measured without paying one
call per query for the whole sweep).

Depth: a job searches ``search_depth(retriever, needed, floor)`` hits per query, where ``needed`` is
what the job itself uses (its deepest metric cut-off, or the reranker's candidates) and ``floor`` is
``retrieval.search_depth``. Every retriever names the deepest search whose top ``needed`` equals a
search at depth ``needed`` (``depth_limit``); a retriever that names none is searched at ``needed``.
So ``retrieval.topk=3,5,10`` (needed 10 each: every job scores down to rank 10, ``retrieval/mrr_at_10``)
all search at depth 10, share one retrieval cache entry and search once per retriever, with every metric
as a search at each job's own depth would give.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from ragbench.protocols import DepthLimited, Retriever
from ragbench.retrieval.scope import DocumentScope
from ragbench.types import Hit, Query

DEFAULT_SEARCH_DEPTH = 10
SINGLE_SAMPLE = 16  # queries re-searched one at a time for latency/search_single_*


def search_depth(retriever: Retriever, needed: int, floor: int) -> int:
    """The depth to search: at least ``needed``, up to ``floor`` when the retriever keeps that exact."""
    if not isinstance(retriever, DepthLimited) or floor <= needed:
        return needed
    limit = retriever.depth_limit(needed)
    return floor if limit is None else max(needed, min(floor, limit))


def search_all(retriever: Retriever, texts: Sequence[str], vectors: np.ndarray | None, k: int,
               scoped: DocumentScope | None = None,
               queries: Sequence[Query] = ()) -> tuple[list[list[Hit]], list[float]]:
    """Every query's top ``k`` in batches, and each query's share of its batch's time in seconds."""
    if scoped is not None:
        return scoped.search_many(texts=texts, vectors=vectors, k=k, doc_ids=[q.doc_ids for q in queries])
    if not texts:
        return [], []
    start = time.perf_counter()
    hits = retriever.search(texts=list(texts), vectors=vectors, k=k)
    share = (time.perf_counter() - start) / len(texts)
    return hits, [share] * len(texts)


def time_single(retriever: Retriever, texts: Sequence[str], vectors: np.ndarray | None, k: int,
                scoped: DocumentScope | None = None, queries: Sequence[Query] = (),
                sample: int = SINGLE_SAMPLE) -> list[float]:
    """Seconds of up to ``sample`` queries (evenly spaced) each searched alone, after the batched pass
    (document sub-indexes are already built, so only the search is timed)."""
    n = len(texts)
    rows = sorted({int(i) for i in np.linspace(0, n - 1, num=min(sample, n))}) if n else []
    out = []
    for i in rows:
        qvec = None if vectors is None else vectors[i: i + 1]
        start = time.perf_counter()
        if scoped is None:
            retriever.search(texts=[texts[i]], vectors=qvec, k=k)
        else:
            scoped.search(text=texts[i], vector=qvec, k=k, doc_ids=queries[i].doc_ids)
        out.append(time.perf_counter() - start)
    return out
