"""Retrieval scope: ``corpus`` searches every chunk; ``document`` searches only the chunks of the
question's own documents (a LoCoMo conversation, a Qasper paper, a syllabus, a filing), as the
datasets' official protocols do (LoCoMo's ``task_eval`` builds one store per conversation).

``DocumentScope`` wraps any retriever: per distinct set of document ids it builds a fresh copy of
the (unbuilt) retriever over those documents' rows only -- the corpus vectors are sliced, never
re-encoded -- and keeps it for the next question on the same documents. Dense scores are the same
cosines as in the corpus index; BM25's IDF is the document's own, as in a store per document;
a hybrid retriever fuses its children inside the document. A question that names no document
searches the whole corpus and is counted (``retrieval/scope_corpus_fallbacks``).
"""

from __future__ import annotations

import copy
import time
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from ragbench.protocols import Retriever

# re-exported for ragbench/app.py only, until it imports them from ragbench.scopes (the lead's redesign)
from ragbench.scopes import check_scope, declared_scope  # noqa: F401
from ragbench.types import Hit


class DocumentScope:
    """Searches each question's own documents with a copy of ``prototype`` built on their chunks."""

    def __init__(self, prototype: Retriever) -> None:
        self.prototype = copy.deepcopy(prototype)  # never built: each document set gets a fresh copy
        self._rows: dict[str, list[int]] = defaultdict(list)
        self._ids: list[str] = []
        self._texts: list[str] = []
        self._vectors: np.ndarray | None = None
        self._built: dict[tuple[str, ...], Retriever] = {}
        self.indexes_built = 0
        self.corpus_fallbacks = 0

    def build(self, *, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray | None,
              doc_of: Sequence[str]) -> None:
        """Remembers which rows belong to which document; sub-indexes are built on first use."""
        self._ids, self._texts, self._vectors = list(ids), list(texts), vectors
        self._rows.clear()
        self._built.clear()
        for row, doc in enumerate(doc_of):
            self._rows[doc].append(row)

    def _retriever(self, doc_ids: Sequence[str]) -> Retriever | None:
        key = tuple(sorted(set(doc_ids)))
        if not key:  # a question naming no document searches the whole corpus, counted
            self.corpus_fallbacks += 1
        if key not in self._built:
            rows = sorted(r for d in key for r in self._rows.get(d, ())) if key else list(range(len(self._ids)))
            if not rows:
                return None  # its documents hold no searchable chunk: nothing to retrieve
            sub = copy.deepcopy(self.prototype)
            sub.build(ids=[self._ids[r] for r in rows], texts=[self._texts[r] for r in rows],
                      vectors=None if self._vectors is None else self._vectors[rows])
            self._built[key] = sub
            self.indexes_built += 1
        return self._built[key]

    def search(self, *, text: str, vector: np.ndarray | None, k: int, doc_ids: Sequence[str]) -> list[Hit]:
        """Top ``k`` hits of one question among its documents' chunks (all chunks when it names none)."""
        sub = self._retriever(doc_ids)
        if sub is None:
            return []
        return sub.search(texts=[text], vectors=vector, k=k)[0]

    def search_many(self, *, texts: Sequence[str], vectors: np.ndarray | None, k: int,
                    doc_ids: Sequence[Sequence[str]]) -> tuple[list[list[Hit]], list[float]]:
        """Every question's top ``k`` with one search call per document set (all questions of one
        conversation in a batch), and each question's share of its batch's wall time in seconds."""
        groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for i, docs in enumerate(doc_ids):
            groups[tuple(sorted(set(docs)))].append(i)
        hits: list[list[Hit]] = [[] for _ in texts]
        seconds = [0.0] * len(texts)
        for key, rows in groups.items():
            start = time.perf_counter()
            sub = self._retriever(key)
            if sub is not None:
                found = sub.search(texts=[texts[i] for i in rows], vectors=None if vectors is None else vectors[rows],
                                   k=k)
                for i, row_hits in zip(rows, found, strict=True):
                    hits[i] = row_hits
            share = (time.perf_counter() - start) / len(rows)
            for i in rows:
                seconds[i] = share
        return hits, seconds
