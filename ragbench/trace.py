"""Per-stage trace of one case (``trace=true``): the candidates and scores at each stage, and where the
first gold unit entered and left.

Stages, in order: ``child:<Retriever>`` (each child of a hybrid retriever, before fusion; with several
variants ``child:<Retriever>@query:<j>``), ``query:<j>`` (each variant's ranking, when a query transform
searched several),
``retrieval`` (what the retriever returned for the question: the RRF of the variants, the hybrid
fusion of its children), each reranker by class name (``rerank:<Name>``; a reranker that fell back
keeps the order it got), ``topk`` (the hits handed on), ``expansion`` (the context chunks). A stage
holds gold when one of its candidates is a relevant searchable chunk (expansion: a context covering
evidence). ``gold_entered`` is the first stage holding gold; ``gold_lost`` the first stage after it
that does not (None when gold is kept to the end, or never entered).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ragbench.evidence import EvidenceMap, context_has_evidence
from ragbench.metric_info import MetricInfo
from ragbench.protocols import FusedRetriever
from ragbench.types import ChunkTree, Context, Hit, Query

SCORE_DIGITS = 6


def stage(name: str, hits: Sequence[Hit], gold: Iterable[str]) -> dict[str, Any]:
    """One stage's record: candidate ids, scores, and whether a gold chunk is among them."""
    relevant = set(gold)
    return {"stage": name, "ids": [h.chunk_id for h in hits], "scores": [round(h.score, SCORE_DIGITS) for h in hits],
            "gold": any(h.chunk_id in relevant for h in hits)}


BRANCHES = ("query:", "child:")  # parallel rankings before the retrieval stage: entry only, never a loss


def child_rankings(retriever: Any, scoped: Any, texts: Sequence[str], vectors: np.ndarray | None,
                   owners: Sequence[Query], k: int) -> list[list[tuple[str, list[Hit]]]]:
    """Per searched text, each child retriever's own ranking (a hybrid's dense and BM25 before RRF), from
    the built retriever (under document scope, the question's own sub-index); empty without children."""
    out: list[list[tuple[str, list[Hit]]]] = []
    for i, text in enumerate(texts):
        sub = retriever if scoped is None else scoped._retriever(owners[i].doc_ids)
        children = sub.children if isinstance(sub, FusedRetriever) else []
        vec = None if vectors is None else vectors[i: i + 1]
        depth = max(sub.candidates, k) if isinstance(sub, FusedRetriever) else k
        out.append([(type(ch).__name__, ch.search(texts=[text], vectors=vec, k=depth)[0]) for ch in children])
    return out


def branch_stages(variants: Sequence[Sequence[Hit]],
                  children: Sequence[Sequence[tuple[str, Sequence[Hit]]]]) -> list[tuple[str, Sequence[Hit]]]:
    """The named rankings before the retrieval stage: per variant its children's rankings, then its own."""
    several = len(variants) > 1
    out: list[tuple[str, Sequence[Hit]]] = []
    for j, ranking in enumerate(variants):
        at = f"@query:{j}" if several else ""
        out.extend((f"child:{name}{at}", hits) for name, hits in (children[j] if j < len(children) else ()))
        if several:
            out.append((f"query:{j}", ranking))
    return out


def expansion_stage(tree: ChunkTree, emap: EvidenceMap, contexts: Sequence[Context]) -> dict[str, Any]:
    """The expansion stage: the context chunks (score 0), holding gold when one covers evidence."""
    return {"stage": "expansion", "ids": [x.chunk_id for x in contexts], "scores": [0.0] * len(contexts),
            "gold": any(context_has_evidence(tree, emap, x) for x in contexts)}


def gold_path(stages: Sequence[Mapping[str, Any]]) -> dict[str, str | None]:
    """``gold_entered`` and ``gold_lost`` over the stages of the main line (variant rankings count for entry)."""
    entered = lost = None
    for st in stages:
        if entered is None:
            if st["gold"]:
                entered = st["stage"]
            continue
        if str(st["stage"]).startswith(BRANCHES):
            continue
        if not st["gold"]:
            lost = st["stage"]
            break
    return {"gold_entered": entered, "gold_lost": lost}


# trace_counts' keys (trace=true): where each case's gold evidence went through the stages
METRICS = {
    "trace/gold_kept": MetricInfo("cases whose gold evidence, once retrieved, reached the contexts", "ragbench",
                                  kind="diagnostic", job_level="a count of the traced cases", unit="count"),
    "trace/gold_never_retrieved": MetricInfo("cases whose gold evidence no stage retrieved", "ragbench",
                                             higher_is_better=False, kind="diagnostic",
                                             job_level="a count of the traced cases", unit="count"),
    "trace/gold_lost_at/<name>": MetricInfo("cases whose gold evidence was retrieved, then dropped at this stage",
                                            "ragbench", higher_is_better=False, kind="diagnostic",
                                            job_level="a count of the traced cases", unit="count"),
}


def trace_counts(traces: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Job metrics: cases whose gold was kept to the end, never retrieved, or lost at each stage."""
    out: dict[str, float] = {}
    for tr in traces:
        if not tr or "gold_entered" not in tr:
            continue
        if tr["gold_entered"] is None:
            key = "trace/gold_never_retrieved"
        elif tr["gold_lost"] is None:
            key = "trace/gold_kept"
        else:
            key = f"trace/gold_lost_at/{str(tr['gold_lost']).split(':')[0]}"
        out[key] = out.get(key, 0.0) + 1.0
    return out


def gold_path_tags(traces: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Run tags for the MLflow runs table: the most frequent stage where the first gold unit entered and
    where it was lost, each as ``<stage> (<n> of <traced> cases)``; ``none`` when no traced case has one."""
    traced = [tr for tr in traces if tr and "gold_entered" in tr]
    if not traced:
        return {}
    out: dict[str, str] = {}
    for tag, field in (("ragbench.trace.gold_entered_at", "gold_entered"), ("ragbench.trace.gold_lost_at", "gold_lost")):
        seen = Counter(str(tr[field]) for tr in traced if tr[field] is not None)
        name, n = seen.most_common(1)[0] if seen else ("none", 0)
        out[tag] = f"{name} ({n} of {len(traced)} cases)"
    return out
