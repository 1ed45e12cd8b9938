"""Recall of an approximate index against exact search on the same queries (a diagnostic of the job)."""

from __future__ import annotations

from collections.abc import Sequence

from ragbench.metric_info import MetricInfo

PREFIX = "retrieval/ann_recall_at_"
METRICS = {
    f"{PREFIX}<k>": MetricInfo(
        "mean over queries of |approximate top k & exact top k| / |exact top k|, exact = a flat inner-product "
        "search of the same query vectors over the same corpus vectors (ties at the cut: lower row first)",
        "the recall@k of ANN benchmarks (ann-benchmarks, faiss's own evaluations)",
        kind="diagnostic", job_level="mean over the queries that have an exact hit (the index's own search)",
    ),
}


def recall_vs_exact(approx: Sequence[Sequence[str]], exact: Sequence[Sequence[str]],
                    ks: Sequence[int]) -> dict[str, float]:
    """``retrieval/ann_recall_at_<k>`` for each k: the share of each query's exact top k that its
    approximate top k holds, averaged over the queries that have any exact hit."""
    if len(approx) != len(exact):
        raise ValueError(f"{len(approx)} approximate rankings for {len(exact)} exact ones")
    out: dict[str, float] = {}
    for k in ks:
        shares = [len(set(a[:k]) & set(e[:k])) / len(e[:k]) for a, e in zip(approx, exact, strict=True) if e[:k]]
        if shares:
            out[f"{PREFIX}{k}"] = sum(shares) / len(shares)
    return out
