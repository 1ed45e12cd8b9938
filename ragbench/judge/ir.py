"""Pure IR metrics of one ranked list against graded qrels, with trec_eval's exact semantics."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ragbench.errors import RagbenchError

# trec_eval's default relevance_level: a judged id with grade >= 1 counts as relevant.
RELEVANCE_LEVEL = 1


def has_relevant(qrels: Mapping[str, int]) -> bool:
    """True when ``qrels`` holds at least one relevant id (grade > 0)."""
    return any(rel >= RELEVANCE_LEVEL for rel in qrels.values())


def metric_names(ks: Sequence[int]) -> list[str]:
    """The keys ``retrieval_metrics`` returns for ``ks``, in a stable order."""
    names = [f"{m}_at_{k}" for k in ks for m in ("hit", "recall", "precision", "ndcg", "map", "mrr")]
    return [*names, "mrr"]


def _check(ranked: Sequence[str], ks: Sequence[int]) -> None:
    if len(set(ranked)) != len(ranked):
        dup = next(r for i, r in enumerate(ranked) if r in ranked[:i])
        raise RagbenchError(
            f"retrieval_metrics: ranked list repeats id '{dup}'; "
            "fix: deduplicate hits before scoring (a retriever must return each chunk once)"
        )
    for k in ks:
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise RagbenchError(f"retrieval_metrics: cut-off k={k!r} is invalid; fix: use integers >= 1")


def _dcg(gains: Sequence[float], k: int) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains[:k]) if g)


def retrieval_metrics(ranked: Sequence[str], qrels: Mapping[str, int], ks: Sequence[int]) -> dict[str, float]:
    """Hit/recall/precision/nDCG/MAP/MRR at each k plus uncut MRR, equal to trec_eval's values.

    ``ranked`` holds ids best first without duplicates; ``qrels`` maps id -> graded relevance (ids
    missing from it are non-relevant; grade >= 1 is relevant). Correspondence to trec_eval:
    ``hit_at_k`` = success_k, ``recall_at_k`` = recall_k, ``precision_at_k`` = P_k (always divided
    by k, even if fewer ids were retrieved), ``ndcg_at_k`` = ndcg_cut_k (linear gain = grade,
    log2(rank + 1) discount, ideal from all qrels), ``map_at_k`` = map_cut_k (divided by the total
    number of relevant ids), ``mrr`` = recip_rank, ``mrr_at_k`` = recip_rank counted only when the
    first relevant id is within k (BEIR's MRR@k). Negative grades count as gain 0.

    A query whose qrels hold no relevant id gets 0.0 for every metric (as pytrec_eval reports);
    callers should exclude such queries from means and count them (see ``has_relevant``).
    """
    _check(ranked, ks)
    gains = [float(max(qrels.get(doc, 0), 0)) for doc in ranked]
    relevant = [qrels.get(doc, 0) >= RELEVANCE_LEVEL for doc in ranked]
    num_rel = sum(1 for rel in qrels.values() if rel >= RELEVANCE_LEVEL)
    ideal = sorted((float(rel) for rel in qrels.values() if rel > 0), reverse=True)

    first = next((i + 1 for i, r in enumerate(relevant) if r), None)
    # Average-precision terms: precision at each relevant rank.
    ap_terms: list[float] = []
    found = 0
    for i, r in enumerate(relevant):
        if r:
            found += 1
            ap_terms.append(found / (i + 1))

    out: dict[str, float] = {}
    for k in ks:
        rel_k = sum(relevant[:k])
        idcg = _dcg(ideal, k)
        out[f"hit_at_{k}"] = 1.0 if rel_k else 0.0
        out[f"recall_at_{k}"] = rel_k / num_rel if num_rel else 0.0
        out[f"precision_at_{k}"] = rel_k / k
        out[f"ndcg_at_{k}"] = _dcg(gains, k) / idcg if idcg > 0 else 0.0
        out[f"map_at_{k}"] = sum(ap_terms[:rel_k]) / num_rel if num_rel else 0.0
        out[f"mrr_at_{k}"] = 1.0 / first if first is not None and first <= k else 0.0
    out["mrr"] = 1.0 / first if first is not None else 0.0
    return out
