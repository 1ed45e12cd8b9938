"""Retrieval metrics of one query at chunk level and at the dataset's evidence unit."""

from __future__ import annotations

from collections.abc import Sequence

from ragbench.evidence import EvidenceMap, evidence_recall, relevant_searchable, unit_ranking
from ragbench.judge.ir import retrieval_metrics
from ragbench.types import ChunkTree, Hit

BASE_KS = (1, 3, 5)


def metric_ks(topk: int) -> list[int]:
    """Cut-offs reported: 1, 3, 5 and the job's top-k."""
    return sorted({*BASE_KS, topk})


def retrieval_scores(
    tree: ChunkTree, emap: EvidenceMap, hits: Sequence[Hit], ks: Sequence[int], topk: int
) -> dict[str, float]:
    """``retrieval/chunk/<m>`` against the searchable chunks covering evidence, ``retrieval/<m>`` over
    evidence units (see ``unit_ranking``), and text evidence recall of the top-k hits. Queries
    without matched evidence get no retrieval scores (they are counted apart)."""
    if not emap.matched:
        return {}
    out: dict[str, float] = {}
    ranked = [h.chunk_id for h in hits]
    for key, value in retrieval_metrics(ranked, relevant_searchable(tree, emap), ks).items():
        out[f"retrieval/chunk/{key}"] = value
    for k in ks:
        units, qrels = unit_ranking(tree, emap, hits[:k])
        cut = max(len(units), 1)
        for key, value in retrieval_metrics(units, qrels, [cut]).items():
            if key == "mrr":
                continue
            name = key.rsplit("_at_", 1)[0]
            out[f"retrieval/{name}_at_{k}"] = value
    units, qrels = unit_ranking(tree, emap, hits)
    out["retrieval/mrr"] = retrieval_metrics(units, qrels, [max(len(units), 1)])["mrr"]
    texts = [t for t in emap.texts if t]
    rec = evidence_recall(texts, [tree[h.chunk_id].text for h in hits[:topk]])
    if rec is not None:
        out["retrieval/evidence_recall"] = rec
    return out
