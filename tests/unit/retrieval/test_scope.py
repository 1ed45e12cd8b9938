"""retrieval.scope: document searches only each question's documents; one embedding serves both scopes."""

from __future__ import annotations

import pytest

from ragbench.cache.store import StageCache
from ragbench.errors import ConfigError
from ragbench.pipeline import Pipeline
from ragbench.retrieval.bm25 import BM25Retriever
from ragbench.retrieval.dense import FaissRetriever
from ragbench.retrieval.hybrid import RRFRetriever
from ragbench.scopes import check_scope
from tests.fixtures.toy import HashEmbedder, toy_components


def components(**over):
    return toy_components(**{"topk": 5, **over})


RETRIEVERS = {
    "dense": FaissRetriever,
    "bm25": BM25Retriever,
    "hybrid": lambda: RRFRetriever(children=[FaissRetriever(), BM25Retriever()]),
}


@pytest.mark.parametrize("name", sorted(RETRIEVERS))
def test_document_scope_keeps_hits_in_the_question_documents(name):
    result = Pipeline(components(retriever=RETRIEVERS[name](), scope="document")).run()
    by_qid = {c.query.qid: c for c in result.cases}
    for qid in ("q1", "q2"):
        docs = set(by_qid[qid].query.doc_ids)
        assert by_qid[qid].hits and {result.tree[h.chunk_id].doc_id for h in by_qid[qid].hits} <= docs
    # q3 names no document: it searches the whole corpus, counted
    assert result.metrics["retrieval/scope_corpus_fallbacks"] == 1.0
    corpus = Pipeline(components(retriever=RETRIEVERS[name](), scope="corpus")).run()
    q1 = next(c for c in corpus.cases if c.query.qid == "q1")
    if name != "bm25":  # dense search over the corpus reaches the other document too
        assert {corpus.tree[h.chunk_id].doc_id for h in q1.hits} == {"a", "b"}
    assert "retrieval/scope_corpus_fallbacks" not in corpus.metrics


def test_sweeping_scope_encodes_the_corpus_once(tmp_path):
    emb = HashEmbedder()
    first = Pipeline(components(embedder=emb, scope="corpus"), cache=StageCache(dir=str(tmp_path))).run()
    cache = StageCache(dir=str(tmp_path))
    second = Pipeline(components(embedder=emb, scope="document"), cache=cache).run()
    assert first.metrics["ingest/embedded_texts"] == 4 and second.metrics["ingest/embedded_texts"] == 0
    assert emb.calls == [4, 3]  # corpus and queries, by the first job only
    assert cache.hits["index"] == 1 and cache.hits.get("retrieval", 0) == 0  # vectors shared, hits not
    assert first.fingerprints["index_sha256"] != second.fingerprints["index_sha256"]


@pytest.mark.parametrize("scope", ["Document", "doc", "", "all"])
def test_bad_scope_is_a_named_config_error(scope):
    with pytest.raises(ConfigError, match=r"retrieval.scope=.* choose one of \['document', 'corpus'\]"):
        check_scope(scope)


@pytest.mark.parametrize("overrides,scope", [
    (["dataset=locomo"], "document"), (["dataset=qasper"], "document"), (["dataset=syllabusqa"], "document"),
    (["dataset=financebench"], "document"), (["dataset=multihop_rag"], "corpus"), (["dataset=custom"], "corpus"),
    (["dataset=locomo", "retrieval=bm25", "retrieval.scope=corpus"], "corpus"),
    (["dataset=multihop_rag", "retrieval=hybrid", "retrieval.scope=document"], "document"),
])
def test_each_dataset_defaults_to_its_official_scope(tmp_path, overrides, scope):
    from tests.fixtures.jobs import compose_cfg

    assert compose_cfg(overrides, tmp_path).retrieval.scope == scope
