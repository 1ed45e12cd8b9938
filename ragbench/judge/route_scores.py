"""Routing's per-case scores (``routing.by=rules|llm``, ``ragbench.routing``), from what the case record
keeps under ``trace.route`` (``class``: the predicted class; ``expected``: the class its gold type should
get under ``routing.expected``; ``fallback``: the LLM classifier could not tell), so ``ragbench.verify``
recomputes them: ``routing/accuracy`` (1 when the class is the expected one; cases whose gold type has no
expected class have none), ``routing/route/<class>`` (1 for the case's class, 0 for the others: the job's
mean is each route's share) and ``routing/fallback``. A leaf module: ``ragbench.judge.hops`` reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragbench.metric_info import MetricInfo

CLASSES = ("single", "decompose", "iterative")  # what a classifier predicts (routing.routes.<class>)
ROUTE = "route"  # the case trace's key holding the routing decision
_SRC = "ragbench (issue 42): routing by a classifier (routing.by=rules|llm)"

METRICS: dict[str, MetricInfo] = {
    "routing/accuracy": MetricInfo(
        "share of the questions whose predicted route is the one routing.expected names for their gold "
        "question type; over the cases whose type has one", _SRC, kind="diagnostic"),
    "routing/route/<name>": MetricInfo(
        "share of the questions the classifier sent to route <name> (single, decompose, iterative)", _SRC,
        kind="diagnostic"),
    "routing/fallback": MetricInfo(
        "routing.by=llm: share of the questions whose classification failed or named no route (routed "
        "single)", _SRC, higher_is_better=False, kind="diagnostic"),
}


def route_scores(decision: Any) -> dict[str, float]:
    """The routing scores of a case's recorded decision (``trace.route``), none without one."""
    if not isinstance(decision, Mapping) or decision.get("class") not in CLASSES:
        return {}
    cls = decision["class"]
    out = {f"routing/route/{c}": float(c == cls) for c in CLASSES}
    if decision.get("expected") in CLASSES:
        out["routing/accuracy"] = float(cls == decision["expected"])
    if "fallback" in decision:
        out["routing/fallback"] = float(bool(decision["fallback"]))
    return out
