"""Question-type routing (EasyRAG's ``query_route``): per question type, another top-k (contexts handed
to the generator) and small-to-big parent depth, e.g. ``+routing.by_type.temporal.topk=10``.

ragbench routes by the dataset's *gold* question type (``routing.by=gold_type``): an analysis of what
each type needs, not a deployed classifier -- the run says so (tag ``ragbench.routing``). A routed case
retrieves as deep as its top-k needs; its retrieval metrics stay at the job's cut-offs (so they compare
across routes); its contexts, answer and context metrics follow its route.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ragbench.errors import ConfigError
from ragbench.judge.aggregate import metric_name
from ragbench.protocols import Expander
from ragbench.types import Query
from ragbench.validate import integer

ROUTED_KEYS = ("topk", "parent_depth")
ROUTED_BY = ("gold_type",)


@dataclass(frozen=True)
class Route:
    """What differs for one question type (None: the job's own value)."""

    topk: int | None = None
    parent_depth: int | None = None


def parse_routes(node: Mapping[str, Any] | None) -> dict[str, Route]:
    """``routing`` as {type (metric_name form): Route}; one-line ConfigErrors for unknown keys and values."""
    node = dict(node or {})
    by = node.get("by", "gold_type")
    if by not in ROUTED_BY:
        raise ConfigError(f"routing.by={by!r} is not supported; use one of {list(ROUTED_BY)} (the dataset's own "
                          "question type, for analysis)")
    routes: dict[str, Route] = {}
    for qtype, settings in dict(node.get("by_type") or {}).items():
        where = f"routing.by_type.{qtype}"
        if not isinstance(settings, Mapping):
            raise ConfigError(f"{where} must hold settings such as {where}.topk=10, got {settings!r}")
        unknown = sorted(set(settings) - set(ROUTED_KEYS))
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]} is not routable; route one of {list(ROUTED_KEYS)}")
        topk, depth = settings.get("topk"), settings.get("parent_depth")
        topk = None if topk is None else integer(f"{where}.topk", topk, lo=1)
        depth = None if depth is None else integer(f"{where}.parent_depth", depth, lo=0, hi=3)
        routes[metric_name(str(qtype))] = Route(topk=topk, parent_depth=depth)
    return routes


def route_for(routes: Mapping[str, Route], query: Query, expander: Expander, topk: int) -> tuple[Expander, int]:
    """The expander and top-k of ``query``'s type (the job's when its type has no route)."""
    r = routes.get(metric_name(query.question_type))
    if r is None:
        return expander, topk
    if r.parent_depth is not None and expander.parent_depth != r.parent_depth:
        expander = copy.copy(expander)
        expander.parent_depth = r.parent_depth
    return expander, r.topk or topk


def max_topk(routes: Mapping[str, Route]) -> int:
    """The deepest routed top-k (0 without routes): retrieval must reach it."""
    return max((r.topk or 0 for r in routes.values()), default=0)


def routing_tag(routes: Mapping[str, Route]) -> dict[str, str]:
    """``ragbench.routing``: what was routed, and that it routed by the gold type."""
    if not routes:
        return {}
    parts = [f"{t}(" + ",".join(f"{k}={getattr(r, k)}" for k in ROUTED_KEYS if getattr(r, k) is not None) + ")"
             for t, r in sorted(routes.items())]
    return {"ragbench.routing": "by gold question type (analysis, not a deployed classifier): " + " ".join(parts)}
