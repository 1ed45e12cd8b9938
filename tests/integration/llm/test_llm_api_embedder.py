"""APIEmbedder against the loopback /v1/embeddings: batching, normalisation, dim, identity, cache."""

from __future__ import annotations

import numpy as np
import pytest

from ragbench.cache.replies import reply_store
from ragbench.cache.store import StageCache
from ragbench.embed.api import APIEmbedder
from ragbench.errors import ConfigError
from ragbench.protocols import Embedder


@pytest.fixture()
def embedder(llm_server, cache_dir, monkeypatch):
    monkeypatch.setenv("RAGBENCH_EMB_KEY", "sk-emb-key-123")
    with reply_store(StageCache(dir=str(cache_dir))):  # as a job builds it: embeddings cached in the job's store
        return APIEmbedder(
            model="openai/emb-model",
            api_base=llm_server.url,
            api_key_env="RAGBENCH_EMB_KEY",
            batch_size=2,
            num_retries=0,
            query_prefix="query: ",
        )


def test_satisfies_the_embedder_protocol(embedder, llm_server):
    # on Python 3.11 isinstance() reads the `dim` property, which probes the server once
    assert isinstance(embedder, Embedder)
    assert llm_server.count == 1


def test_batches_normalise_and_keep_order(embedder, llm_server):
    texts = ["red apple", "green pear", "red apple", "blue sky", "sky"]
    vecs = embedder.embed_documents(texts)
    assert vecs.shape == (5, llm_server.dim) and vecs.dtype == np.float32
    assert llm_server.count == 3  # ceil(5 / batch_size 2)
    assert [len(r["input"]) for r in llm_server.requests] == [2, 2, 1]
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(vecs[0], vecs[2])
    assert float(vecs[3] @ vecs[4]) > float(vecs[3] @ vecs[0])  # shared word -> closer
    assert embedder.dim == llm_server.dim and llm_server.count == 3  # learnt from the first batch


def test_query_prefix_is_sent_and_part_of_identity(embedder, llm_server):
    embedder.embed_queries(["where?"])
    assert llm_server.requests[0]["input"] == ["query: where?"]
    assert embedder.identity == "litellm:openai/emb-model|dims=None|normalize=1|qp='query: '|dp=''"


def test_dim_probe_and_empty_input(embedder, llm_server):
    assert embedder.dim == llm_server.dim and llm_server.count == 1
    assert embedder.embed_queries([]).shape == (0, llm_server.dim)


def test_cache_serves_a_rerun(embedder, llm_server, cache_dir):
    first = embedder.embed_documents(["a b", "c d"])
    again = embedder.embed_documents(["a b", "c d"])
    np.testing.assert_array_equal(first, again)
    assert llm_server.count == 1 and len(list((cache_dir / "llm").rglob("*.json"))) == 1


def test_bad_settings(llm_server, cache_dir):
    with pytest.raises(ConfigError, match="batch_size"):
        APIEmbedder(model="openai/e", api_base=llm_server.url, batch_size=0)
    with pytest.raises(ConfigError, match="dimensions"):
        APIEmbedder(model="openai/e", api_base=llm_server.url, dimensions=0)
