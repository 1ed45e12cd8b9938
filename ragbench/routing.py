"""Question routing (EasyRAG's ``query_route``, grown up in issue 42): per question, another top-k
(contexts handed to the generator), small-to-big parent depth, a decomposition (``query: decompose``) or
iterative retrieval (``mode: iterative``).

``routing.by`` picks the key a question is routed by:

- ``gold_type`` (the default): the dataset's *gold* question type, ``routing.by_type.<type>.*``, e.g.
  ``+routing.by_type.temporal.topk=10``: an analysis of what each type needs, not a deployed classifier --
  the run says so (tag ``ragbench.routing``);
- ``rules`` | ``llm``: a classifier (``ragbench.query.classify``) predicts one of ``CLASSES`` per question
  and ``routing.routes.<class>.*`` holds that class's settings. ``routing.expected`` maps gold types to
  the class they should get: routing accuracy is logged where the data has types
  (``ragbench.judge.route_scores``).

A routed case retrieves as deep as its top-k needs; its retrieval metrics stay at the job's cut-offs (so
they compare across routes); its contexts, answer and context metrics follow its route.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragbench.errors import ConfigError
from ragbench.judge.aggregate import metric_name
from ragbench.judge.route_scores import CLASSES
from ragbench.protocols import Expander
from ragbench.types import Query
from ragbench.validate import integer

ROUTED_KEYS = ("topk", "parent_depth", "query", "mode")
ROUTED_BY = ("gold_type", "rules", "llm")
CLASSIFIERS = ("rules", "llm")
ROUTE_QUERIES = ("decompose",)  # routing.*.query: the question is decomposed (ragbench.query.decompose)
ROUTE_MODES = ("iterative",)  # routing.*.mode: retrieval.mode=iterative for the question
DECOMPOSERS = ("rules", "llm")  # routing.decomposer: the decompose route's decomposer


@dataclass(frozen=True)
class Route:
    """What differs for one question type or class (None: the job's own value)."""

    topk: int | None = None
    parent_depth: int | None = None
    query: str | None = None  # decompose: the question split into sub-questions, one hop each
    mode: str | None = None  # iterative: retrieval.mode=iterative for this question


@dataclass(frozen=True)
class Routing:
    """The ``routing`` node: ``by``, the gold-type routes, the class routes and the expected classes."""

    by: str = "gold_type"
    by_type: Mapping[str, Route] = field(default_factory=dict)
    routes: Mapping[str, Route] = field(default_factory=dict)  # per class (classifiers only)
    expected: Mapping[str, str] = field(default_factory=dict)  # gold type (metric_name form) -> class
    decomposer: str = "rules"

    @property
    def classifier(self) -> bool:
        return self.by in CLASSIFIERS

    @property
    def steers(self) -> bool:
        """Whether any route changes what is searched (a decomposition or iterative retrieval)."""
        return self.classifier or any(r.query or r.mode for r in self.by_type.values())


def parse_routes(node: Mapping[str, Any] | None) -> dict[str, Route]:
    """``routing.by_type`` as {type (metric_name form): Route}; one-line ConfigErrors for unknown keys and
    values (the whole node is checked: ``parse_routing``)."""
    return dict(parse_routing(node).by_type)


def parse_routing(node: Mapping[str, Any] | None) -> Routing:
    """The ``routing`` node as a ``Routing``; one-line ConfigErrors for unknown keys and values."""
    node = dict(node or {})
    by = node.get("by", "gold_type")
    if by not in ROUTED_BY:
        raise ConfigError(f"routing.by={by!r} is not supported; use one of {list(ROUTED_BY)} (gold_type: the "
                          "dataset's own question type, for analysis; rules or llm: a classifier)")
    by_type = {metric_name(str(t)): _route(f"routing.by_type.{t}", s)
               for t, s in dict(node.get("by_type") or {}).items()}
    if by in CLASSIFIERS and by_type:
        raise ConfigError(f"routing.by_type routes by the gold type, but routing.by={by}; fix: put the settings "
                          f"under routing.routes.<class> (one of {list(CLASSES)}), or set routing.by=gold_type")
    routes: dict[str, Route] = {}
    for cls, settings in dict(node.get("routes") or {}).items():
        if cls not in CLASSES:
            raise ConfigError(f"routing.routes.{cls} is not a route; the classifiers predict one of {list(CLASSES)}")
        routes[str(cls)] = _route(f"routing.routes.{cls}", settings or {})
    expected: dict[str, str] = {}
    for qtype, cls in dict(node.get("expected") or {}).items():
        if cls not in CLASSES:
            raise ConfigError(f"routing.expected.{qtype}={cls!r} is not a route; use one of {list(CLASSES)}")
        expected[metric_name(str(qtype))] = str(cls)
    decomposer = str(node.get("decomposer") or "rules")
    if decomposer not in DECOMPOSERS:
        raise ConfigError(f"routing.decomposer={decomposer!r} is not known; use one of {list(DECOMPOSERS)}")
    return Routing(by=str(by), by_type=by_type, routes=routes, expected=expected, decomposer=decomposer)


def _route(where: str, settings: Any) -> Route:
    if not isinstance(settings, Mapping):
        raise ConfigError(f"{where} must hold settings such as {where}.topk=10, got {settings!r}")
    unknown = sorted(set(settings) - set(ROUTED_KEYS))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]} is not routable; route one of {list(ROUTED_KEYS)}")
    topk, depth = settings.get("topk"), settings.get("parent_depth")
    topk = None if topk is None else integer(f"{where}.topk", topk, lo=1)
    depth = None if depth is None else integer(f"{where}.parent_depth", depth, lo=0, hi=3)
    query, mode = settings.get("query"), settings.get("mode")
    if query not in (None, *ROUTE_QUERIES):
        raise ConfigError(f"{where}.query={query!r} is not routable; use one of {list(ROUTE_QUERIES)} or null")
    if mode not in (None, *ROUTE_MODES):
        raise ConfigError(f"{where}.mode={mode!r} is not routable; use one of {list(ROUTE_MODES)} or null")
    return Route(topk=topk, parent_depth=depth, query=query, mode=mode)


def route_for(routes: Mapping[str, Route], query: Query, expander: Expander, topk: int,
              chosen: Route | None = None) -> tuple[Expander, int]:
    """The expander and top-k of ``query``'s type (the job's when its type has no route); ``chosen``: the
    route a classifier picked for it, in place of its type's."""
    r = chosen if chosen is not None else routes.get(metric_name(query.question_type))
    if r is None:
        return expander, topk
    if r.parent_depth is not None and expander.parent_depth != r.parent_depth:
        expander = copy.copy(expander)
        expander.parent_depth = r.parent_depth
    return expander, r.topk or topk


def max_topk(routes: Mapping[str, Route]) -> int:
    """The deepest routed top-k (0 without routes): retrieval must reach it."""
    return max((r.topk or 0 for r in routes.values()), default=0)


def routing_tag(routes: Mapping[str, Route], routing: Routing | None = None) -> dict[str, str]:
    """``ragbench.routing``: what was routed, and how: by the gold type, or by a classifier (``routing``'s
    ``by``: its class routes)."""
    by_classifier = routing is not None and routing.classifier
    routes = routing.routes if routing is not None and by_classifier else routes
    if not routes:
        return {}
    parts = [f"{t}(" + ",".join(f"{k}={getattr(r, k)}" for k in ROUTED_KEYS if getattr(r, k) is not None) + ")"
             for t, r in sorted(routes.items())]
    how = (f"by the {routing.by} classifier (routing.by={routing.by})" if routing is not None and by_classifier
           else "by gold question type (analysis, not a deployed classifier)")
    return {"ragbench.routing": f"{how}: " + " ".join(parts)}
