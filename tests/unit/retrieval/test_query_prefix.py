"""embedder.query_prefix (the retrieval instruction) reaches the dense side only: BM25, alone or inside
hybrid, searches the question as written (issue 44 item 11)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragbench.pipeline import Pipeline
from ragbench.retrieval.bm25 import BM25Retriever
from ragbench.retrieval.dense import FaissRetriever
from ragbench.retrieval.hybrid import RRFRetriever
from ragbench.types import Hit
from tests.fixtures.toy import HashEmbedder, toy_components

PREFIX = "cat bicycle Lisbon: "  # words of the corpus, so the prefix really moves the query vectors


class PrefixedEmbedder(HashEmbedder):
    """HashEmbedder with sentence-transformers' rule: the query prefix is read before every query."""

    def __init__(self, query_prefix: str) -> None:
        super().__init__()
        self.query_prefix = query_prefix
        self.queries: list[str] = []

    @property
    def identity(self) -> str:
        return f"{super().identity}|qp={self.query_prefix!r}"

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.queries.extend(self.query_prefix + t for t in texts)
        return self.embed_documents([self.query_prefix + t for t in texts])


class SpyBM25(BM25Retriever):
    """BM25 that keeps the texts it was asked to search."""

    def __init__(self) -> None:
        super().__init__()
        self.searched: list[str] = []

    def search(self, *, texts: Sequence[str], vectors: np.ndarray | None = None, k: int) -> list[list[Hit]]:
        self.searched.extend(texts)
        return super().search(texts=texts, vectors=vectors, k=k)


def _run(retriever, prefix: str) -> dict[str, list[str]]:
    result = Pipeline(toy_components(embedder=PrefixedEmbedder(prefix), retriever=retriever, topk=3)).run()
    return {c.query.qid: [h.chunk_id for h in c.hits] for c in result.cases}


def test_bm25_ignores_the_query_prefix():
    plain, spy = SpyBM25(), SpyBM25()
    assert _run(plain, "") == _run(spy, PREFIX)
    assert spy.searched and not any(t.startswith(PREFIX) for t in spy.searched)


def test_hybrid_prefixes_the_dense_side_only():
    lexical = SpyBM25()
    emb = PrefixedEmbedder(PREFIX)
    Pipeline(toy_components(embedder=emb, retriever=RRFRetriever(children=[FaissRetriever(), lexical]),
                            topk=3)).run()
    assert emb.queries and all(q.startswith(PREFIX) for q in emb.queries)  # the dense side read it
    assert lexical.searched and not any(t.startswith(PREFIX) for t in lexical.searched)
    # and the prefix does move the dense ranking here, so the lexical side's sameness is not vacuous
    assert _run(FaissRetriever(), "") != _run(FaissRetriever(), PREFIX)
