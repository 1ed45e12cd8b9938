"""Pure IR metrics of one ranked list against graded qrels, with trec_eval's exact semantics."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

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


def _check(ranked: Sequence[str]) -> None:
    if len(set(ranked)) != len(ranked):
        dup = next(r for i, r in enumerate(ranked) if r in ranked[:i])
        raise RagbenchError(
            f"retrieval_metrics: ranked list repeats id '{dup}'; "
            "fix: deduplicate hits before scoring (a retriever must return each chunk once)"
        )


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
    It is ``covering_metrics`` of a ranking whose every entry covers one id, itself.
    """
    _check(ranked)
    return covering_metrics([(doc,) for doc in ranked], qrels, ks)


def covering_metrics(covered: Sequence[Iterable[str]], qrels: Mapping[str, int],
                     ks: Sequence[int]) -> dict[str, float]:
    """The metrics of ``retrieval_metrics`` for a ranking whose entries (hits) each cover a set of judged
    ids (evidence units): one rank per entry, whatever it covers.

    An entry's *new* ids are those it covers that no earlier entry covered. The entry is relevant when a
    new id has grade >= 1, and its gain is the highest grade of its new ids (an entry that brings two
    units earns one rank's gain; one that brings only ids seen above it is non-relevant). With R the
    number of relevant ids in ``qrels``: ``hit_at_k`` = a relevant entry in the first k;
    ``precision_at_k`` = relevant entries in the first k / k; ``recall_at_k`` = distinct relevant ids
    covered by the first k / R (so one entry can bring recall to 1); ``ndcg_at_k`` = DCG of the entries'
    gains (log2(rank + 1) discount) / the ideal DCG of the qrels' grades sorted best first, one per rank
    (trec_eval's ideal: every ideal entry brings one id, so nDCG <= 1); ``map_at_k`` = the sum over
    relevant entries in the first k of precision at the entry's rank x the relevant ids it newly covers,
    / R (average precision as precision x recall gained per rank); ``mrr_at_k`` = 1 / rank of the first
    relevant entry when it is within k, ``mrr`` the same uncut. When every entry covers at most one new id
    (``retrieval_metrics``: each id covers itself) these are trec_eval's values.
    """
    for k in ks:
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise RagbenchError(f"retrieval_metrics: cut-off k={k!r} is invalid; fix: use integers >= 1")
    seen: set[str] = set()
    gains: list[float] = []
    new_rel: list[int] = []  # per entry: the relevant ids it covers first
    for ids in covered:
        best = n = 0
        for unit in ids:
            if unit in seen:  # covered above (or twice in this entry): nothing new
                continue
            seen.add(unit)
            grade = qrels.get(unit, 0)
            best = max(best, grade)
            n += grade >= RELEVANCE_LEVEL
        gains.append(float(best))
        new_rel.append(n)
    relevant = [n > 0 for n in new_rel]
    num_rel = sum(1 for rel in qrels.values() if rel >= RELEVANCE_LEVEL)
    ideal = sorted((float(rel) for rel in qrels.values() if rel > 0), reverse=True)

    first = next((i + 1 for i, r in enumerate(relevant) if r), None)
    # average-precision terms: precision at each relevant rank x the relevant ids first covered there
    ap_terms: list[float] = []
    found = 0
    for i, n in enumerate(new_rel):
        if n:
            found += 1
            ap_terms.append(n * found / (i + 1))

    out: dict[str, float] = {}
    for k in ks:
        rel_k = sum(relevant[:k])
        idcg = _dcg(ideal, k)
        out[f"hit_at_{k}"] = 1.0 if rel_k else 0.0
        out[f"recall_at_{k}"] = sum(new_rel[:k]) / num_rel if num_rel else 0.0
        out[f"precision_at_{k}"] = rel_k / k
        out[f"ndcg_at_{k}"] = _dcg(gains, k) / idcg if idcg > 0 else 0.0
        out[f"map_at_{k}"] = sum(ap_terms[:rel_k]) / num_rel if num_rel else 0.0
        out[f"mrr_at_{k}"] = 1.0 / first if first is not None and first <= k else 0.0
    out["mrr"] = 1.0 / first if first is not None else 0.0
    return out
