"""Per-hop retrieval quality of a multi-step case (``query=decompose``, ``retrieval.mode=iterative|adaptive``,
an outside system's trajectory): each hop is one searched text with its top-k hits. A case keeps its hops
in its record (``trace.hops``: the hop's query, its ranked chunk ids and the gold evidence items each hit
covers, its LLM tokens and its latency), so ``ragbench.verify`` recomputes every score here from the record.

The gold items are the question's matched evidence items (``ev<i>``, ``ragbench.evidence.unit_qrels``).
A hop is *redundant* when it finds no gold item that an earlier hop did not find already.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragbench.evidence import Coverage, EvidenceMap
from ragbench.judge.route_scores import METRICS as ROUTE_METRICS
from ragbench.judge.route_scores import ROUTE, route_scores
from ragbench.metric_info import MetricInfo
from ragbench.types import Hit

HOPS = "hops"  # the case trace's key holding the hops
ADAPTIVE = "adaptive"  # the case trace's key holding retrieval.mode=adaptive's decision
MAX_HOP_KEYS = 8  # retrieval/hop/recall_hop_<n> for the first n hops (later hops count in the means)
_SRC = "ragbench (issue 42): per-hop quality of multi-step retrieval"
_HAS = "; over the multi-step cases whose evidence matched"

METRICS: dict[str, MetricInfo] = {
    "retrieval/hop/coverage": MetricInfo(
        "share of the question's gold evidence items found by the top-k hits of any hop" + _HAS, _SRC,
        kind="diagnostic"),
    "retrieval/hop/recall": MetricInfo(
        "mean over the case's hops of the share of gold evidence items in that hop's top-k hits" + _HAS, _SRC,
        kind="diagnostic"),
    "retrieval/hop/recall_hop_<k>": MetricInfo(
        "share of the gold evidence items in the top-k hits of hop <k> (1 = the first)" + _HAS, _SRC,
        kind="diagnostic"),
    "retrieval/hop/redundant_rate": MetricInfo(
        "share of the case's hops that found no gold evidence item that an earlier hop had not found" + _HAS,
        _SRC, higher_is_better=False, kind="diagnostic"),
    "retrieval/hop/used": MetricInfo("hops the case searched (sub-questions, iterations, trajectory steps)",
                                     _SRC, higher_is_better=False, kind="diagnostic"),
    "retrieval/hop/tokens": MetricInfo(
        "LLM tokens (prompt + completion) spent per hop to write its query: a decomposition's tokens "
        "shared among its sub-questions, an iteration's own call", _SRC, higher_is_better=False,
        kind="diagnostic"),
    "retrieval/adaptive/retrieved": MetricInfo(
        "retrieval.mode=adaptive: share of the questions retrieved for (the others answered closed-book)",
        "ragbench (Adaptive-RAG, Jeong et al. 2024: retrieve only when needed)", kind="diagnostic"),
    "retrieval/hop/latency_ms": MetricInfo("search latency per hop (ms), LLM time for its query included",
                                           _SRC, higher_is_better=False, kind="diagnostic"),
    **ROUTE_METRICS,  # routing/*: a classifier's routes (ragbench.judge.route_scores), read from the same record
}


@dataclass(frozen=True)
class HopInput:
    """One hop as searched: its query, its ranking, the LLM tokens and the seconds it took."""

    query: str
    hits: Sequence[Hit]
    tokens: int = 0
    seconds: float | None = None
    source: str = ""  # decompose | iterative | trajectory | question


def hop_record(hop: HopInput, cov: Coverage | None, topk: int) -> dict[str, Any]:
    """A hop as its case record keeps it: the top-k ids and the gold items each one covers."""
    top = list(hop.hits)[:topk]
    return {"query": hop.query, "source": hop.source, "ranked_ids": [h.chunk_id for h in top],
            "hit_units": [list(cov.units(h.chunk_id)) if cov is not None else [] for h in top],
            "tokens": int(hop.tokens),
            "latency_ms": None if hop.seconds is None else round(hop.seconds * 1000, 3)}


def hop_scores(hops: Sequence[Mapping[str, Any]], gold: Collection[str], matched: bool) -> dict[str, float]:
    """The per-hop scores of a case from its recorded hops; ``gold``: its matched evidence units."""
    gold = set(gold)
    if not hops:  # adaptive, closed-book: no hop, nothing found
        return {"retrieval/hop/used": 0.0, **({"retrieval/hop/coverage": 0.0} if matched and gold else {})}
    out = {"retrieval/hop/used": float(len(hops)),
           "retrieval/hop/tokens": sum(float(h.get("tokens") or 0) for h in hops) / len(hops)}
    timed = [float(h["latency_ms"]) for h in hops if isinstance(h.get("latency_ms"), (int, float))]
    if timed:
        out["retrieval/hop/latency_ms"] = sum(timed) / len(timed)
    if not matched or not gold:
        return out
    seen: set[str] = set()
    recalls: list[float] = []
    redundant = 0
    for n, hop in enumerate(hops, 1):
        found = {u for units in hop["hit_units"] for u in units if u in gold}
        recalls.append(len(found) / len(gold))
        if n <= MAX_HOP_KEYS:
            out[f"retrieval/hop/recall_hop_{n}"] = recalls[-1]
        redundant += not (found - seen)
        seen |= found
    out["retrieval/hop/recall"] = sum(recalls) / len(recalls)
    out["retrieval/hop/coverage"] = len(seen) / len(gold)
    out["retrieval/hop/redundant_rate"] = redundant / len(hops)
    return out


def scores_from_record(row: Mapping[str, Any]) -> dict[str, float]:
    """``hop_scores`` of a case line (``ragbench.verify``): its ``trace.hops`` and unit qrels."""
    trace = row.get("trace")
    if not isinstance(trace, Mapping):
        return {}
    out = {**adaptive_scores(trace.get(ADAPTIVE)), **route_scores(trace.get(ROUTE))}
    hops = trace.get(HOPS)
    if isinstance(hops, list):
        out.update(hop_scores(hops, row["qrels"]["unit"], bool(row["evidence"]["matched"])))
    return out


def adaptive_scores(decision: Any) -> dict[str, float]:
    """``retrieval/adaptive/retrieved`` of a case's adaptive decision (``trace.adaptive``), if any."""
    if not isinstance(decision, Mapping) or "retrieved" not in decision:
        return {}
    return {"retrieval/adaptive/retrieved": float(bool(decision["retrieved"]))}


def multi_document(evidence_docs: Sequence[Sequence[str]]) -> bool:
    """Whether an evaluation set has a question whose evidence spans two documents or more (MultiHop-RAG's
    multi-article questions): its single-step jobs record the question as one hop, so that they compare
    with the multi-step ones on the same per-hop keys."""
    return any(len({d for d in docs if d}) >= 2 for docs in evidence_docs)


def record_hops(trace: dict[str, Any], hops: Sequence[HopInput] | None, adaptive: Mapping[str, Any] | None,
                emap: EvidenceMap, cov: Coverage, topk: int) -> dict[str, float]:
    """Puts a case's hops (and adaptive decision) into its trace, as its record keeps them, and returns
    their scores, computed from exactly what is recorded (so verify recomputes them)."""
    if adaptive is not None:
        trace[ADAPTIVE] = dict(adaptive)
    if hops is not None:
        trace[HOPS] = [hop_record(h, cov if emap.matched else None, topk) for h in hops]
    row = {"trace": trace, "qrels": {"unit": cov.unit_qrels()}, "evidence": {"matched": bool(emap.matched)}}
    return scores_from_record(row)
