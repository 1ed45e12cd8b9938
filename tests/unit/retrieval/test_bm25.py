"""BM25Retriever and the lexical tokenizer: hand-computed scores, options, CJK, batching, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragbench.errors import ConfigError, RagbenchError
from ragbench.protocols import Retriever
from ragbench.retrieval.bm25 import BM25Retriever, top_hits
from ragbench.retrieval.tokenize import Tokenizer, cjk_bigrams

DOCS = {
    "d0": "The cat sat on the mat.",
    "d1": "Dogs are running in the park; a dog runs fast.",
    "d2": "Quarterly revenue grew 3.5 percent to 2,000 million dollars.",
    "d3": "我们在北京大学学习自然语言处理。",
    "d4": "The museum in 東京 opened a new exhibition about cats.",
}


def _built(**kwargs: object) -> BM25Retriever:
    r = BM25Retriever(**kwargs)  # type: ignore[arg-type]
    r.build(ids=list(DOCS), texts=list(DOCS.values()), vectors=None)
    return r


def _ids(hits: list) -> list[str]:
    return [h.chunk_id for h in hits]


# ------------------------------------------------------------------ tokenizer
def test_tokenizer_english_stem_and_stopwords() -> None:
    tok = Tokenizer(stemming=True, stopwords=True)
    assert tok.tokenize("The Running DOGS ran quickly") == ["run", "dog", "ran", "quick"]
    plain = Tokenizer(stemming=False, stopwords=False)
    assert plain.tokenize("The Running DOGS isn't") == ["the", "running", "dogs", "isn", "t"]


@pytest.mark.parametrize(("choice", "name", "terms"), [
    ("nltk", "nltk", ["caroline", "research"]), (True, "nltk", ["caroline", "research"]),
    ("lucene", "lucene", ["what", "did", "caroline", "research"]),
    ("none", "none", ["what", "did", "caroline", "research"]), (False, "none", ["what", "did", "caroline", "research"]),
])
def test_stopword_lists(choice, name, terms) -> None:
    tok = Tokenizer(stemming=False, stopwords=choice)
    assert tok.stopwords == name and tok.tokenize("What did Caroline research") == terms


def test_unknown_stopword_list() -> None:
    with pytest.raises(ConfigError, match=r"stopwords='klingon' is not a stopword list; use one of"):
        Tokenizer(stopwords="klingon")


def test_tokenizer_numbers_and_width_normalisation() -> None:
    tok = Tokenizer(stemming=False, stopwords=False)
    assert tok.tokenize("grew 3.5% to 2,000. Ｆｕｌｌ café") == ["grew", "3.5", "to", "2,000", "full", "café"]


def test_tokenizer_cjk_bigrams_and_mixed_text() -> None:
    assert cjk_bigrams("北京大学") == ["北京", "京大", "大学"]
    assert cjk_bigrams("中") == ["中"]
    tok = Tokenizer(stemming=False, stopwords=False)
    assert tok.tokenize("去北京的flights到東京タワー") == [
        "去北", "北京", "京的", "flights", "到東", "東京", "京タ", "タワ", "ワー",
    ]  # fmt: skip
    assert tok.tokenize_many(["a b", "中文"]) == [["a", "b"], ["中文"]]


def test_tokenizer_unknown_stemmer_language() -> None:
    with pytest.raises(ConfigError, match="klingon"):
        Tokenizer(stemming=True, language="klingon")


# ------------------------------------------------------------------ retriever
def test_satisfies_protocol_and_params() -> None:
    r = BM25Retriever(k1=0.9, b=0.4, method="robertson", stemming=False)
    assert isinstance(r, Retriever) and r.needs_vectors is False
    assert r.params() == {
        "k1": 0.9, "b": 0.4, "method": "robertson", "stemming": False, "stopwords": "nltk", "language": "english",
    }  # fmt: skip


def test_lucene_score_matches_hand_computation() -> None:
    k1, b = 1.2, 0.75
    r = _built(k1=k1, b=b, method="lucene", stemming=False, stopwords=False)
    tok = Tokenizer(stemming=False, stopwords=False)
    lengths = [len(tok.tokenize(t)) for t in DOCS.values()]
    avgdl = sum(lengths) / len(lengths)
    # "park" occurs once, only in d1.
    n, df, tf, dl = len(DOCS), 1, 1, lengths[1]
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    expected = idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))
    [[hit]] = r.search(texts=["park"], vectors=None, k=3)
    assert hit.chunk_id == "d1" and hit.rank == 1
    assert hit.score == pytest.approx(expected, rel=1e-5)


def test_ranking_ranks_and_only_matching_chunks() -> None:
    r = _built()
    [hits] = r.search(texts=["cats on a mat"], vectors=None, k=10)
    assert _ids(hits) == ["d0", "d4"]  # d0 has cat+mat; d4 only cats; nothing else matches
    assert [h.rank for h in hits] == [1, 2]
    assert hits[0].score > hits[1].score > 0


def test_stemming_switch() -> None:
    assert _ids(_built(stemming=True).search(texts=["running dog"], vectors=None, k=5)[0]) == ["d1"]
    assert _built(stemming=False).search(texts=["run"], vectors=None, k=5) == [[]]


def test_stopword_switch() -> None:
    assert _built(stopwords=True).search(texts=["the"], vectors=None, k=5) == [[]]
    hits = _built(stopwords=False).search(texts=["the"], vectors=None, k=5)[0]
    assert set(_ids(hits)) == {"d0", "d1", "d4"}


def test_cjk_and_numbers() -> None:
    r = _built()
    res = r.search(texts=["北京大学", "東京の博物館", "revenue 3.5"], vectors=None, k=5)
    assert _ids(res[0]) == ["d3"]
    assert _ids(res[1]) == ["d4"]
    assert _ids(res[2]) == ["d2"]


def test_batch_equals_single_queries_and_k_cut() -> None:
    r = _built()
    queries = ["cat", "dog park", "北京", "nothing matches xyzzy", "the museum cats mat"]
    batch = r.search(texts=queries, vectors=None, k=2)
    assert batch == [r.search(texts=[q], vectors=None, k=2)[0] for q in queries]
    assert batch[3] == [] and len(batch[4]) == 2


@pytest.mark.parametrize("method", ["robertson", "lucene", "atire", "bm25l", "bm25+"])
def test_every_method_returns_only_matches(method: str) -> None:
    [hits] = _built(method=method).search(texts=["park"], vectors=None, k=5)
    assert _ids(hits) == ["d1"]


def test_errors() -> None:
    with pytest.raises(ConfigError, match="method='bm26'"):
        BM25Retriever(method="bm26")
    with pytest.raises(ConfigError, match="k1"):
        BM25Retriever(k1=-1)
    r = BM25Retriever()
    with pytest.raises(RagbenchError, match="before build"):
        r.search(texts=["x"], vectors=None, k=1)
    with pytest.raises(RagbenchError, match="ids repeat"):
        r.build(ids=["a", "a"], texts=["x", "y"], vectors=None)
    with pytest.raises(RagbenchError, match="2 ids but 1 texts"):
        r.build(ids=["a", "b"], texts=["x"], vectors=None)
    with pytest.raises(RagbenchError, match="no chunks"):
        r.build(ids=[], texts=[], vectors=None)


def test_top_hits_ties_keep_index_order() -> None:
    scores = np.array([0.5, 2.0, 0.5, 0.0, 2.0], dtype=np.float32)
    hits = top_hits(scores, ["a", "b", "c", "d", "e"], k=4)
    assert _ids(hits) == ["b", "e", "a", "c"]
    assert _ids(top_hits(scores, ["a", "b", "c", "d", "e"], k=10)) == ["b", "e", "a", "c"]
