"""From questions to the texts searched, and back: ``QueryPlan`` flattens each question's variants
(``ragbench.query.transforms``) into one list of texts to retrieve, then fuses each question's variant
rankings into one ranking with the RRF of ``ragbench.retrieval.hybrid`` (one rule in one place) and
counts, per chunk, the variant rankings that held it (the votes ``reranker=frequency`` reads).

With one variant per question (``query=none``, ``hyde``) the plan is the identity: the searched texts
are the questions' texts (or the hypothetical answers) and the rankings pass through unchanged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from ragbench.protocols import QueryTransform
from ragbench.query.decompose import HopTransform
from ragbench.retrieval.hybrid import rrf_fuse
from ragbench.types import Hit, Query


@dataclass(frozen=True)
class QueryPlan:
    """Per question, its variants; ``starts[i]`` is the row of question i's first variant in ``texts``."""

    variants: tuple[tuple[str, ...], ...]
    k_rrf: float = 60.0
    merge: str = "rrf"  # query.merge of query=decompose: rrf | interleave (ragbench.query.decompose)

    @property
    def texts(self) -> list[str]:
        return [t for vs in self.variants for t in vs]

    @property
    def starts(self) -> list[int]:
        out, row = [], 0
        for vs in self.variants:
            out.append(row)
            row += len(vs)
        return out

    def owners(self, queries: Sequence[Query]) -> list[Query]:
        """The question of each searched text (its document scope applies to all its variants)."""
        return [q for q, vs in zip(queries, self.variants, strict=True) for _ in vs]

    def fuse(self, flat: Sequence[Sequence[Hit]], k: int) -> tuple[list[list[Hit]], list[dict[str, int]]]:
        """Per question: the RRF of its variant rankings (top ``k``; the ranking itself with one
        variant) and the votes per chunk (how many variant rankings held it)."""
        fused: list[list[Hit]] = []
        votes: list[dict[str, int]] = []
        for start, vs in zip(self.starts, self.variants, strict=True):
            rankings = [list(r) for r in flat[start: start + len(vs)]]
            votes.append(dict(Counter(cid for r in rankings for cid in {h.chunk_id for h in r})))
            if len(rankings) == 1:
                fused.append(rankings[0][:k])
            elif self.merge == "interleave":
                fused.append(interleave(rankings, k))
            else:
                fused.append(rrf_fuse(rankings, weights=[1.0] * len(rankings), k_rrf=self.k_rrf, k=k))
        return fused, votes

    def rankings(self, flat: Sequence[Sequence[Hit]], i: int) -> list[Sequence[Hit]]:
        """Question i's variant rankings, as searched."""
        start = self.starts[i]
        return list(flat[start: start + len(self.variants[i])])


def plan_queries(transform: QueryTransform, queries: Sequence[Query], *, k_rrf: float = 60.0,
                 workers: int = 1) -> QueryPlan:
    """Each question's variants (LLM transforms ask up to ``workers`` questions at once)."""
    merge = transform.merge if isinstance(transform, HopTransform) else "rrf"
    if workers <= 1:  # query=none, or one question at a time: in this thread, without a future per question
        return QueryPlan(variants=tuple(map(transform.variants, queries)), k_rrf=float(k_rrf), merge=merge)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        variants = tuple(pool.map(transform.variants, queries))
    return QueryPlan(variants=variants, k_rrf=float(k_rrf), merge=merge)


def interleave(rankings: Sequence[Sequence[Hit]], k: int) -> list[Hit]:
    """Round-robin over the rankings (the first hit of each, then the second of each, ...), each chunk
    once, cut to ``k``; a hit keeps its score and is re-ranked by its place."""
    out: list[Hit] = []
    seen: set[str] = set()
    for depth in range(max((len(r) for r in rankings), default=0)):
        for ranking in rankings:
            if depth < len(ranking) and ranking[depth].chunk_id not in seen:
                seen.add(ranking[depth].chunk_id)
                out.append(replace(ranking[depth], rank=len(out) + 1))
    return out[:k]

