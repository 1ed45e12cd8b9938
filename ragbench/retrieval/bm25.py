"""Lexical retrieval with bm25s over the searchable chunks (English stemming/stopwords, CJK bigrams)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragbench.errors import ConfigError, RagbenchError
from ragbench.retrieval.tokenize import Tokenizer
from ragbench.types import Hit
from ragbench.validate import integer

log = logging.getLogger(__name__)

METHODS = ("robertson", "lucene", "atire", "bm25l", "bm25+")


def top_hits(scores: np.ndarray, ids: Sequence[str], k: int, floor: float = 0.0) -> list[Hit]:
    """The best ``k`` ids by score (ties by index order), keeping only scores above ``floor``."""
    n = min(k, scores.shape[0])
    if n <= 0:
        return []
    if n < scores.shape[0]:
        cut = scores[np.argpartition(-scores, n - 1)[n - 1]]  # the n-th best score
        part = np.flatnonzero(scores >= cut)  # every chunk tied at the cut, so the lowest indexes win
    else:
        part = np.arange(scores.shape[0])
    # lexsort's last key is primary: score descending, then index ascending for a stable order.
    order = part[np.lexsort((part, -scores[part]))][:n]
    return [
        Hit(chunk_id=ids[i], score=float(scores[i]), rank=r)
        for r, i in enumerate((i for i in order if scores[i] > floor), start=1)
    ]


class BM25Retriever:
    """BM25 (bm25s) over chunk texts; returns only chunks sharing at least one term with the query."""

    needs_vectors = False

    def __init__(
        self,
        *,
        k1: float = 1.2,
        b: float = 0.75,
        method: str = "lucene",
        stemming: bool = True,
        stopwords: bool | str = "nltk",
        language: str = "english",
    ) -> None:
        if method not in METHODS:
            raise ConfigError(f"retrieval.retriever.method='{method}' is unknown; use one of {list(METHODS)}")
        if k1 < 0 or not 0.0 <= b <= 1.0:
            raise ConfigError(
                f"retrieval.retriever: k1={k1}, b={b} out of range; use k1 >= 0 and 0 <= b <= 1 "
                "(typical k1=1.2, b=0.75)"
            )
        self.k1 = k1
        self.b = b
        self.method = method
        self.stemming = stemming
        self.language = language
        self.tokenizer = Tokenizer(stemming=stemming, stopwords=stopwords, language=language)
        self.stopwords = self.tokenizer.stopwords  # the list's name (true -> nltk): in the index key
        self._bm25: Any = None
        self._ids: list[str] = []

    def params(self) -> Mapping[str, Any]:
        """Everything that changes the index, for the cache key."""
        return {
            "k1": self.k1,
            "b": self.b,
            "method": self.method,
            "stemming": self.stemming,
            "stopwords": self.stopwords,
            "language": self.language,
        }

    def build(self, *, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray | None = None) -> None:
        """Tokenize and index ``texts`` (``vectors`` is ignored)."""
        import bm25s
        logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets DEBUG on import

        if len(ids) != len(texts):
            raise RagbenchError(
                f"BM25Retriever.build: {len(ids)} ids but {len(texts)} texts; fix: pass one text per chunk id"
            )
        if not ids:
            raise RagbenchError("BM25Retriever.build: no chunks to index; fix: check the dataset and chunker")
        if len(set(ids)) != len(ids):
            raise RagbenchError("BM25Retriever.build: chunk ids repeat; fix: chunk ids must be unique")
        bm25 = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        bm25.index(self.tokenizer.tokenize_many(texts), show_progress=False)
        self._bm25 = bm25
        self._ids = list(ids)
        log.debug("BM25 indexed %d chunks, vocabulary of %d terms", len(ids), len(bm25.vocab_dict))

    def depth_limit(self, k: int) -> int | None:
        """Any depth: scores are exact and ties keep index order, so a deeper top-k starts with this one."""
        return None

    def search(self, *, texts: Sequence[str], vectors: np.ndarray | None = None, k: int) -> list[list[Hit]]:
        """Top-``k`` hits per query text, best first; a query sharing no term with the corpus gets none."""
        if self._bm25 is None:
            raise RagbenchError("BM25Retriever.search called before build(); fix: build the index first")
        k = integer("retrieval.topk", k, lo=1)
        bm25 = self._bm25
        nonocc = bm25.nonoccurrence_array
        out: list[list[Hit]] = []
        for terms in self.tokenizer.tokenize_many(texts):
            token_ids = bm25.get_tokens_ids(terms)
            if not token_ids:
                out.append([])
                continue
            scores = bm25.get_scores_from_ids(token_ids)
            # BM25L/BM25+ add a constant for absent terms: a chunk matching nothing scores exactly that.
            floor = float(nonocc[np.asarray(token_ids)].sum()) if nonocc is not None else 0.0
            out.append(top_hits(scores, self._ids, k, floor))
        return out
