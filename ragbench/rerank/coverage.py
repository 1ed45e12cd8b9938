"""``reranker=coverage``: MMR that covers every facet of the question before repeating one.

The evaluation framework's ``CoverageMMRSelector`` (seed 002: "cover the different query intents first,
then MMR on reranker relevance and vector similarity"). Its intents are the multi-query sub-queries that
retrieved each candidate; ragbench's rerankers receive the question and the fused hits only (not which
variant found a hit), so the facets are read from the question text, exactly:

1. the question is cut into clauses at ``?``, ``;``, ``,`` and the words ``and``, ``or``, ``versus``,
   ``vs``, ``as well as``;
2. a clause's facet is the set of its content terms: ``ragbench.text.tokens`` (lower case, punctuation and
   articles dropped) minus ``STOPWORDS`` (Lucene's English set and question words); empty and repeated facets
   are dropped;
3. with fewer than two clause facets, each distinct content term of the question is a facet of its own;
4. a hit covers a facet when its chunk's text has any of the facet's terms (the same tokens).

Selection, ``k`` picks from the hits in their incoming order: relevance is the incoming score min-max
scaled to [0, 1] over the hits (all 1 when they are equal), redundancy the highest cosine to a hit already
picked (chunk vectors), value ``lambda_ * relevance - (1 - lambda_) * redundancy``. While some hit not yet
picked covers a facet no pick covers, the pick is the highest-value such hit; after that, plain MMR. Ties
go to the earlier hit. A hit's score is its value when picked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

from ragbench.errors import RagbenchError
from ragbench.rerank.mmr import check_lambda, unit_rows
from ragbench.retrieval.tokenize import ENGLISH_STOPWORDS
from ragbench.text import tokens
from ragbench.types import ChunkTree, Hit, Query

QUESTION_WORDS = frozenset(["what", "who", "whom", "whose", "when", "where", "which", "why", "how", "did", "do",
                            "does", "were", "has", "have", "had", "can", "could", "would", "should", "much",
                            "many"])
STOPWORDS = ENGLISH_STOPWORDS | QUESTION_WORDS
_CLAUSE = re.compile(r"[?;,]|\b(?:and|or|versus|vs|as well as)\b", re.IGNORECASE)


def _terms(text: str) -> list[str]:
    return [t for t in tokens(text) if t not in STOPWORDS]


def facets(question: str) -> list[frozenset[str]]:
    """The question's facets (see the module docstring), in question order."""
    out: list[frozenset[str]] = []
    for clause in _CLAUSE.split(question):
        facet = frozenset(_terms(clause))
        if facet and facet not in out:
            out.append(facet)
    if len(out) < 2:
        out = [frozenset([t]) for t in dict.fromkeys(_terms(question))]
    return out


class CoverageReranker:
    """Greedy MMR restricted, while it can, to hits that cover a facet no pick covers yet."""

    needs_vectors = True
    needs_votes = False

    def __init__(self, *, lambda_: float = 0.5) -> None:
        self.lambda_ = check_lambda("coverage", lambda_)

    def rerank(
        self,
        query: Query,
        hits: Sequence[Hit],
        *,
        tree: ChunkTree,
        k: int,
        query_vector: np.ndarray | None,
        chunk_vectors: Mapping[str, np.ndarray] | None,
    ) -> list[Hit]:
        """The first ``k`` hits in coverage-then-MMR order; each hit's score is its value when picked."""
        if not hits or k < 1:
            return []
        if chunk_vectors is None or any(h.chunk_id not in chunk_vectors for h in hits):
            raise RagbenchError(
                f"CoverageReranker needs a vector for every hit (query {query.qid}); "
                "fix: the pipeline must pass vectors when reranker.needs_vectors is true"
            )
        wanted = facets(query.text)
        covers = []
        for h in hits:
            words = set(tokens(tree[h.chunk_id].text))
            covers.append({i for i, f in enumerate(wanted) if f & words})
        scores = np.array([h.score for h in hits], dtype=np.float64)
        span = float(scores.max() - scores.min())
        relevance = (scores - scores.min()) / span if span > 0 else np.ones(len(hits))
        docs = unit_rows(np.stack([np.asarray(chunk_vectors[h.chunk_id], dtype=np.float64) for h in hits]))
        pairwise = docs @ docs.T
        lam = self.lambda_
        covered: set[int] = set()
        picked: list[tuple[int, float]] = []
        redundancy: np.ndarray | None = None
        free = np.ones(len(hits), dtype=bool)
        for _ in range(min(k, len(hits))):
            value = lam * relevance if redundancy is None else lam * relevance - (1.0 - lam) * redundancy
            new = np.array([bool(c - covered) for c in covers]) & free
            allowed = new if new.any() else free
            best = int(np.argmax(np.where(allowed, value, -np.inf)))
            picked.append((best, float(value[best])))
            covered |= covers[best]
            free[best] = False
            redundancy = pairwise[best] if redundancy is None else np.maximum(redundancy, pairwise[best])
        return [Hit(chunk_id=hits[i].chunk_id, score=s, rank=r) for r, (i, s) in enumerate(picked, start=1)]
