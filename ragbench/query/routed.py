"""Routing that changes what is searched (``ragbench.routing``): per question a ``Decision`` (its route,
by its gold type or by a classifier's class), made before the query wave; the questions routed to
``query: decompose`` are searched as their sub-questions (``RoutedTransform``), those routed to
``mode: iterative`` run the ``iterate`` wave (``routed_step``), and each case's record keeps its class
(``trace.route``, scored by ``ragbench.judge.route_scores``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from ragbench.errors import ConfigError
from ragbench.judge.aggregate import metric_name
from ragbench.llm.endpoint import LLMEndpoint
from ragbench.query.classify import LLMClassifier, Prediction, RulesClassifier
from ragbench.query.decompose import HopTransform, LLMDecompose, RuleDecompose
from ragbench.query.multistep import MultiStep
from ragbench.routing import Route, Routing
from ragbench.types import Query

ROLE = "routing.client"  # the classifier's (and an LLM decomposer's) endpoint: its calls booked under this role


@dataclass(frozen=True)
class Decision:
    """One question's route; ``record``: what its case record keeps (``trace.route``), None under gold-type
    routing (the route is the type's: nothing predicted)."""

    route: Route
    record: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Router:
    """``routing`` with what it runs: the classifier (``routing.by=rules|llm``) and the decompose route's
    decomposer (``routing.decomposer``)."""

    routing: Routing
    classifier: RulesClassifier | LLMClassifier | None = None
    decomposer: RuleDecompose | LLMDecompose | None = None

    @property
    def routes(self) -> Mapping[str, Route]:
        return self.routing.routes if self.routing.classifier else self.routing.by_type

    def decide(self, queries: Sequence[Query]) -> dict[str, Decision]:
        """Every question's decision (an LLM classifier asks up to its ``max_concurrency`` at once)."""
        r = self.routing
        if self.classifier is None:
            return {q.qid: Decision(r.by_type.get(metric_name(q.question_type)) or Route()) for q in queries}
        classifier = self.classifier
        workers = max(1, classifier.max_concurrency)
        if workers == 1:
            predictions = [classifier.classify(q.text) for q in queries]
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                predictions = list(pool.map(lambda q: classifier.classify(q.text), queries))
        return {q.qid: self._decision(q, p) for q, p in zip(queries, predictions, strict=True)}

    def _decision(self, query: Query, p: Prediction) -> Decision:
        r = self.routing
        record: dict[str, Any] = {"by": r.by, "class": p.cls}
        expected = r.expected.get(metric_name(query.question_type)) if query.question_type else None
        if expected is not None:
            record["expected"] = expected
        if isinstance(self.classifier, LLMClassifier):
            record.update({"fallback": p.fallback, "reply": p.reply, "tokens": p.tokens,
                           **({"error": p.error} if p.error else {})})
        return Decision(r.routes.get(p.cls) or Route(), record)


def routed_transform(base: Any, router: Router | None, decisions: Mapping[str, Decision]) -> Any:
    """The query transform of the job's questions: ``base``, with the questions routed to a decomposition
    searched as their sub-questions (``base`` itself when none is, or when it decomposes already)."""
    if router is None or isinstance(base, HopTransform) or not any(
            d.route.query == "decompose" for d in decisions.values()):
        return base
    if router.decomposer is None:
        raise ValueError("a route decomposes questions but the router has no decomposer")  # parse_routing's job
    return RoutedTransform(base, router.decomposer, {qid for qid, d in decisions.items() if d.route.query})


class RoutedTransform:
    """The job's transform for most questions, a decomposer for the ones routed to ``query: decompose``: a
    ``HopTransform`` whose ``decomposed(qid)`` says which questions' variants are hops."""

    def __init__(self, base: Any, decomposer: RuleDecompose | LLMDecompose, qids: set[str]) -> None:
        self.base, self.decomposer, self.qids = base, decomposer, frozenset(qids)
        self.name = base.name
        self.lexical_ok = bool(base.lexical_ok)
        self.merge = decomposer.merge
        self.max_concurrency = max(int(base.max_concurrency), int(decomposer.max_concurrency))

    @property
    def failures(self) -> int:
        return int(self.base.failures) + int(self.decomposer.failures)

    def decomposed(self, qid: str) -> bool:
        return qid in self.qids

    def variants(self, query: Query) -> tuple[str, ...]:
        return (self.decomposer if query.qid in self.qids else self.base).variants(query)

    def spent(self, qid: str) -> int:
        return self.decomposer.spent(qid) if qid in self.qids else 0

    def params(self) -> Mapping[str, Any]:
        return self.base.params()


def routed_step(step: MultiStep, decision: Decision | None) -> MultiStep:
    """The multi-step mode of one question: iterative when its route says so (the job's mode otherwise)."""
    if decision is not None and decision.route.mode == "iterative" and step.mode == "single":
        return replace(step, mode="iterative")
    return step


def build_router(routing: Routing, client: Mapping[str, Any] | None) -> Router | None:
    """The job's router (None when routing changes nothing searched: gold-type top-k and depth only).
    ``client``: the ``routing.client`` node, built only when a model is asked (``by=llm``, or the decompose
    route's ``routing.decomposer=llm``)."""
    if not routing.steers:
        return None
    routes = routing.routes if routing.classifier else routing.by_type
    decomposes = any(r.query == "decompose" for r in routes.values())
    model = None
    if routing.by == "llm" or (decomposes and routing.decomposer == "llm"):
        node = dict(client or {})
        if not node.get("model"):
            raise ConfigError("routing.by=llm (or routing.decomposer=llm) needs routing.client.model; fix: set it, "
                              "or RAGBENCH_QUERY_MODEL=local for the in-process model")
        settings = {str(k): v for k, v in node.items() if k not in ("_target_", "role")}
        model = LLMEndpoint.of(ROLE, None, settings).client()
    classifier = RulesClassifier() if routing.by == "rules" else LLMClassifier(model) if routing.by == "llm" else None
    decomposer: RuleDecompose | LLMDecompose | None = None
    if decomposes:
        decomposer = RuleDecompose() if routing.decomposer == "rules" else LLMDecompose(client=model)
    return Router(routing, classifier, decomposer)
