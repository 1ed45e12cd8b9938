"""Batched search gives the hits of per-query search; one search depth serves every top-k of a sweep."""

from __future__ import annotations

import numpy as np
import pytest

from ragbench.cache.store import StageCache
from ragbench.components import Components
from ragbench.pipeline import Pipeline
from ragbench.retrieval.batch import search_all, search_depth
from ragbench.retrieval.bm25 import BM25Retriever
from ragbench.retrieval.dense import FaissRetriever
from ragbench.retrieval.hybrid import RRFRetriever
from ragbench.retrieval.scope import DocumentScope
from ragbench.types import Query
from tests.fixtures.toy import toy_components

WORDS = "cat dog red blue lisbon paris spring summer bike car tea coffee".split()
RETRIEVERS = {
    "dense-flat": FaissRetriever,
    "dense-hnsw": lambda: FaissRetriever(index="hnsw", ef_search=32),
    "bm25": BM25Retriever,
    "hybrid": lambda: RRFRetriever(children=[FaissRetriever(), BM25Retriever()], candidates=20),
}


def _corpus(n: int = 300, nq: int = 40) -> tuple[list[str], list[str], np.ndarray, list[str], np.ndarray]:
    """Chunks with repeated texts and vectors (exact ties, as "Thanks!" repeats in LoCoMo)."""
    rng = np.random.default_rng(7)
    texts = [" ".join(rng.choice(WORDS, size=4)) for _ in range(n)]
    texts[50:80] = [texts[10]] * 30
    vecs = rng.standard_normal((n, 16)).astype(np.float32)
    vecs[50:80] = vecs[10]
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    qtexts = [" ".join(rng.choice(WORDS, size=2)) for _ in range(nq)]
    qvecs = rng.standard_normal((nq, 16)).astype(np.float32)
    qvecs[:10] = vecs[10] + 0.01 * qvecs[:10]  # close to the repeated chunk: ties at every cut
    qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
    return [f"c{i}" for i in range(n)], texts, vecs, qtexts, qvecs


@pytest.mark.parametrize("name", sorted(RETRIEVERS))
@pytest.mark.parametrize("scoped", [False, True], ids=["corpus", "document"])
def test_batched_search_equals_per_query_search(name, scoped):
    ids, texts, vecs, qtexts, qvecs = _corpus()
    queries = [Query(qid=f"q{i}", text=t, answers=(), question_type="x", doc_ids=(f"d{i % 3}",)) for i, t in enumerate(qtexts)]
    retriever = RETRIEVERS[name]()
    scope = DocumentScope(retriever) if scoped else None
    if scope is None:
        retriever.build(ids=ids, texts=texts, vectors=vecs)
    else:
        scope.build(ids=ids, texts=texts, vectors=vecs, doc_of=[f"d{i % 3}" for i in range(len(ids))])
    batched, seconds = search_all(retriever, qtexts, qvecs, 10, scope, queries)
    single = [retriever.search(texts=[t], vectors=qvecs[i: i + 1], k=10)[0] if scope is None
              else scope.search(text=t, vector=qvecs[i: i + 1], k=10, doc_ids=queries[i].doc_ids)
              for i, t in enumerate(qtexts)]
    assert batched == single and all(h for h in batched)
    assert len(seconds) == len(qtexts) and all(s > 0 for s in seconds)


@pytest.mark.parametrize("name", sorted(RETRIEVERS))
@pytest.mark.parametrize("k", [1, 3, 5, 10])
def test_top_k_of_the_shared_depth_is_the_top_k_search(name, k):
    ids, texts, vecs, qtexts, qvecs = _corpus()
    retriever = RETRIEVERS[name]()
    retriever.build(ids=ids, texts=texts, vectors=vecs)
    depth = search_depth(retriever, k, 100)
    assert depth > k  # every retriever here may be searched deeper exactly
    deep = retriever.search(texts=qtexts, vectors=qvecs, k=depth)
    assert [hits[:k] for hits in deep] == retriever.search(texts=qtexts, vectors=qvecs, k=k)


def test_depth_keeps_within_what_stays_exact():
    assert search_depth(FaissRetriever(index="hnsw", ef_search=32), 5, 100) == 31
    assert search_depth(FaissRetriever(index="hnsw", ef_search=32), 50, 100) == 50
    assert search_depth(RRFRetriever(children=[BM25Retriever()], candidates=20), 5, 100) == 20
    assert search_depth(BM25Retriever(), 12, 10) == 12

    class Plain(BM25Retriever):  # a retriever naming no depth_limit is searched at what it needs
        depth_limit = None

    assert search_depth(Plain(), 5, 100) == 5


def _components(topk: int, retriever, depth: int = 10) -> Components:
    return toy_components(retriever=retriever, topk=topk, scope="document", search_depth=depth)


def _scores(metrics) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if not k.startswith(("cache/", "latency/", "ingest/", "llm/cache"))}


@pytest.mark.parametrize("name", ["dense-flat", "bm25", "hybrid"])
def test_a_top_k_sweep_searches_once_per_retriever(tmp_path, name):
    """retrieval.topk=3,5,10 through one cache: one retrieval build, two reuses, and each job's metrics
    exactly those of a job searching only as deep as it needs (search_depth=1, no cache)."""
    for topk in (3, 5, 10):
        cache = StageCache(dir=str(tmp_path))
        swept = Pipeline(_components(topk, RETRIEVERS[name]()), cache=cache).run()
        assert (cache.misses["retrieval"], cache.hits["retrieval"]) == ((1, 0) if topk == 3 else (0, 1))
        alone = Pipeline(_components(topk, RETRIEVERS[name](), depth=1)).run()
        assert _scores(swept.metrics) == _scores(alone.metrics)
        assert [c.hits for c in swept.cases] == [c.hits for c in alone.cases]
