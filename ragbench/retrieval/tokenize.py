"""Lexical tokenizer for BM25: lowercased words (optional stemming, stopwords) and CJK character bigrams."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from functools import lru_cache

from ragbench.errors import ConfigError

# Han ideographs (incl. extension A and compatibility forms), kana and CJK punctuation-free runs are
# segmented by overlapping character bigrams; everything else by Unicode word characters.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u309f\u30a0-\u30ff"
# Decimals and grouped numbers ("3.5", "2,000") stay one term.
_TOKEN = re.compile(rf"([{_CJK}]+)|(\d+(?:[.,]\d+)+|(?:(?![{_CJK}])\w)+)")

# Lucene's classic English stop set (``stopwords: lucene``): short on purpose, so BM25 keeps most content.
ENGLISH_STOPWORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no",
     "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this",
     "to", "was", "will", "with"]
)  # fmt: skip


STOPWORD_LISTS = ("nltk", "lucene", "none")


def stopword_list(choice: bool | str) -> tuple[str, frozenset[str]]:
    """The stopword list a ``stopwords`` setting names, and its name. ``nltk`` (default, also ``true``):
    NLTK's 179 English stopwords, as bm25s ships them (``STOPWORDS_EN_PLUS``) -- it drops question words
    ("what", "did", "when"), which lifts LoCoMo recall@10 from 0.526 to 0.593 (benchmarks/
    bench_bm25_quality.py); ``lucene``: Lucene's classic 33; ``none`` (also ``false``): keep every word."""
    name = {True: "nltk", False: "none"}.get(choice, choice) if isinstance(choice, bool) else str(choice)
    if name == "nltk":
        from bm25s.stopwords import STOPWORDS_EN_PLUS

        return name, frozenset(STOPWORDS_EN_PLUS)
    if name == "lucene":
        return name, ENGLISH_STOPWORDS
    if name == "none":
        return name, frozenset()
    raise ConfigError(f"retrieval.retriever.stopwords={choice!r} is not a stopword list; use one of "
                      f"{list(STOPWORD_LISTS)} (true = nltk, false = none)")


def cjk_bigrams(run: str) -> list[str]:
    """Overlapping character bigrams of a CJK run; a single character stays a unigram."""
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


class Tokenizer:
    """Splits text into BM25 terms; English words lowercased, CJK runs into character bigrams."""

    def __init__(self, *, stemming: bool = True, stopwords: bool | str = "nltk", language: str = "english") -> None:
        self.stemming = stemming
        self.stopwords, self._stop = stopword_list(stopwords)
        self.language = language
        self._stem = self._make_stemmer() if stemming else None

    def _make_stemmer(self) -> Callable[[str], str]:
        import Stemmer

        if self.language not in Stemmer.algorithms():
            raise ConfigError(
                f"retrieval.retriever.language='{self.language}' has no Snowball stemmer; "
                f"use one of {sorted(Stemmer.algorithms())} or set stemming=false"
            )
        stemmer = Stemmer.Stemmer(self.language)
        return lru_cache(maxsize=200_000)(stemmer.stemWord)

    def tokenize(self, text: str) -> list[str]:
        """Terms of one text, in order."""
        out: list[str] = []
        for cjk, word in _TOKEN.findall(unicodedata.normalize("NFKC", text).lower()):
            if cjk:
                out.extend(cjk_bigrams(cjk))
                continue
            if word in self._stop:
                continue
            out.append(self._stem(word) if self._stem is not None else word)
        return out

    def tokenize_many(self, texts: Sequence[str]) -> list[list[str]]:
        """Terms of each text."""
        return [self.tokenize(t) for t in texts]
