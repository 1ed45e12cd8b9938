"""Routing by a classifier (issue 42 item 6) on hand-worked examples: the rules classifier, the LLM
classifier's label parsing and fallbacks, the routing config's one-line errors, the per-case routing
scores (accuracy against the gold type, the share per route) and the routed transform."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragbench.errors import ConfigError
from ragbench.judge.hops import scores_from_record
from ragbench.judge.route_scores import route_scores
from ragbench.metric_keys import metric_info
from ragbench.query.classify import LLMClassifier, classify_rules, parse_label
from ragbench.query.decompose import RuleDecompose
from ragbench.query.multistep import MultiStep
from ragbench.query.routed import (
    Decision,
    RoutedTransform,
    Router,
    build_router,
    routed_step,
    routed_transform,
)
from ragbench.query.transforms import NoQueryTransform
from ragbench.routing import Route, parse_routing
from ragbench.types import Query, Usage

ROUTES = {"single": {}, "decompose": {"query": "decompose"}, "iterative": {"mode": "iterative"}}
EXPECTED = {"comparison_query": "decompose", "inference_query": "iterative", "temporal_query": "decompose",
            "null_query": "single"}


@pytest.mark.parametrize(("question", "cls"), [
    # comparisons and conjunctions: the question splits (ragbench.query.decompose.split_rules)
    ("Who is older, Ann or Bob?", "decompose"),
    ("Did the Verge report that Apple sued, while TechCrunch reported that Google settled?", "decompose"),
    ("Is the cost of the ferry line lower than the value of the robotics deal?", "decompose"),
    # a yes/no question holding a before/after does not split, but compares two reports in time
    ("Did The Example Ledger report the recall after Sample Business Daily reported the purchase?", "decompose"),
    ("Between the report of the signing and the report of the derby, did the signing come first?", "decompose"),
    # a bridge: a relative clause on a noun, or an appositive participle after the wh-word's noun
    ("Who directed the film that won Best Picture in 2010?", "iterative"),
    ("Who is the striker that, according to the Wire, joined Riverside FC?", "iterative"),
    ("Which company, reported by the Ledger as the seller, is behind the Talon?", "iterative"),
    # one fact
    ("What is the capital of France?", "single"),
    ("What did Caroline do after the parade?", "single"),  # a wh-question: before/after is no comparison
    ("How many passengers did the ferries carry, as reported by Metro News?", "single"),
])
def test_rules_classifier(question: str, cls: str) -> None:
    assert classify_rules(question) == cls


@pytest.mark.parametrize(("reply", "label"), [
    ("decompose", "decompose"), ("  Iterative.\n", "iterative"), ('"single"', "single"),
    ("Label: decompose - it compares two reports", "decompose"),  # the one class named on the first line
    ("single or decompose", "single"),  # the first word wins
    ("it could be decompose or iterative", None), ("bridge", None), ("", None),
])
def test_parse_label(reply: str, label: str | None) -> None:
    assert parse_label(reply) == label


class _Client:
    """An LLM client stand-in: the classifier's own parsing and fallbacks are what is tested."""

    max_concurrency = 2

    def __init__(self, text: str | None) -> None:
        self.text = text

    def complete(self, messages: list[dict[str, str]]) -> SimpleNamespace:
        assert "Question: Q?" in messages[0]["content"]
        if self.text is None:
            raise TimeoutError("no reply")
        return SimpleNamespace(text=self.text, usage=Usage(prompt_tokens=40, completion_tokens=2))


def test_llm_classifier_falls_back_to_single_and_says_so() -> None:
    ok = LLMClassifier(_Client("iterative")).classify("Q?")
    assert (ok.cls, ok.fallback, ok.tokens) == ("iterative", False, 42)
    unknown = LLMClassifier(_Client("bridge question")).classify("Q?")
    assert (unknown.cls, unknown.fallback, unknown.reply) == ("single", True, "bridge question")
    failed = LLMClassifier(_Client(None)).classify("Q?")
    assert (failed.cls, failed.fallback) == ("single", True) and failed.error == "TimeoutError: no reply"


def test_route_scores_hand_worked() -> None:
    # four cases: two right, one wrong, one whose gold type has no expected class (no accuracy)
    records = [{"by": "rules", "class": "decompose", "expected": "decompose"},
               {"by": "rules", "class": "iterative", "expected": "iterative"},
               {"by": "rules", "class": "single", "expected": "decompose"},
               {"by": "rules", "class": "single"}]
    per_case = [route_scores(r) for r in records]
    acc = [s["routing/accuracy"] for s in per_case if "routing/accuracy" in s]
    assert acc == [1.0, 1.0, 0.0] and sum(acc) / len(acc) == pytest.approx(2 / 3)
    share = {c: sum(s[f"routing/route/{c}"] for s in per_case) / 4 for c in ("single", "decompose", "iterative")}
    assert share == {"single": 0.5, "decompose": 0.25, "iterative": 0.25}
    assert "routing/fallback" not in per_case[0]
    llm = route_scores({"by": "llm", "class": "single", "fallback": True, "expected": "single"})
    assert llm["routing/fallback"] == 1.0 and llm["routing/accuracy"] == 1.0
    assert route_scores(None) == {} and route_scores({"class": "bridge"}) == {}
    # verify recomputes them from the record (ragbench.judge.hops.scores_from_record)
    row = {"trace": {"route": records[2]}, "qrels": {"unit": []}, "evidence": {"matched": False}}
    assert scores_from_record(row)["routing/accuracy"] == 0.0
    for key in ("routing/accuracy", "routing/route/decompose", "routing/fallback"):
        assert metric_info(key).kind == "diagnostic"
    assert metric_info("by_type/comparison_query/routing/accuracy").higher_is_better


def test_routing_config_and_its_errors() -> None:
    r = parse_routing({"by": "rules", "routes": ROUTES, "expected": {"Comparison Query": "decompose"}})
    assert r.classifier and r.steers and r.routes["iterative"] == Route(mode="iterative")
    assert r.expected == {"comparison_query": "decompose"}
    gold = parse_routing({"by_type": {"temporal": {"topk": 10}}})
    assert not gold.steers and build_router(gold, None) is None  # today's gold-type routing: no router
    assert parse_routing({"by_type": {"comparison": {"query": "decompose"}}}).steers
    for node, message in [
        ({"by": "classifier"}, "routing.by='classifier' is not supported"),
        ({"by": "rules", "routes": {"bridge": {}}}, "routing.routes.bridge is not a route"),
        ({"by": "rules", "routes": {"single": {"mode": "loop"}}}, "routing.routes.single.mode='loop' is not routable"),
        ({"by": "rules", "routes": {"single": {"query": "hyde"}}}, "routing.routes.single.query='hyde' is not"),
        ({"by": "rules", "expected": {"null_query": "none"}}, "routing.expected.null_query='none' is not a route"),
        ({"by": "rules", "by_type": {"temporal": {"topk": 3}}}, "routing.by_type routes by the gold type"),
        ({"by": "rules", "decomposer": "spacy"}, "routing.decomposer='spacy' is not known"),
    ]:
        with pytest.raises(ConfigError, match="^" + message.replace(".", r"\.").replace("(", r"\(")):
            parse_routing(node)
    with pytest.raises(ConfigError, match=r"routing.by=llm \(or routing.decomposer=llm\) needs routing.client.model"):
        build_router(parse_routing({"by": "llm", "routes": ROUTES}), {"model": None})


def q(qid: str, text: str, qtype: str = "") -> Query:
    return Query(qid=qid, text=text, answers=("a",), question_type=qtype)


def test_router_decides_and_routes_decompositions_and_iterations() -> None:
    router = build_router(parse_routing({"by": "rules", "routes": ROUTES, "expected": EXPECTED}), None)
    assert router is not None and isinstance(router.decomposer, RuleDecompose)
    qs = [q("c", "Who is older, Ann or Bob?", "comparison_query"),
          q("i", "Who directed the film that won Best Picture?", "inference_query"),
          q("s", "What is the capital of France?", "temporal_query"), q("u", "Who won?")]
    d = router.decide(qs)
    assert {k: v.record["class"] for k, v in d.items() if v.record} == {
        "c": "decompose", "i": "iterative", "s": "single", "u": "single"}
    assert d["s"].record == {"by": "rules", "class": "single", "expected": "decompose"}  # a miss, scored 0
    assert "expected" not in (d["u"].record or {})  # no gold type: no accuracy
    t = routed_transform(NoQueryTransform(), router, d)
    assert isinstance(t, RoutedTransform) and t.decomposed("c") and not t.decomposed("i")
    assert t.variants(qs[0]) == ("Who is older Ann?", "Who is older Bob?")
    assert t.variants(qs[1]) == (qs[1].text,)
    single = MultiStep()
    assert routed_step(single, d["i"]).mode == "iterative" and routed_step(single, d["c"]) is single
    assert routed_step(MultiStep(mode="adaptive"), d["i"]).mode == "adaptive"  # the job's own mode stays
    # nothing routed to a decomposition: the job's transform as it is
    base = NoQueryTransform()
    assert routed_transform(base, router, {"i": d["i"]}) is base
    assert routed_transform(base, None, d) is base
    gold = Router(parse_routing({"by_type": {"comparison": {"query": "decompose", "topk": 8}}}))
    assert gold.decide([q("x", "?", "Comparison")])["x"] == Decision(Route(topk=8, query="decompose"))


def test_a_classifiers_route_sets_the_questions_topk_and_parent_depth() -> None:
    """Issue 44 item 15: routing by a classifier routes ``topk`` and ``parent_depth`` too, not only the
    query and mode (``route_for`` with the case's chosen route, as ``ragbench.cases`` calls it)."""
    from ragbench.routing import max_topk, route_for

    routes = {"single": {"topk": 3, "parent_depth": 0}, "decompose": {"query": "decompose", "topk": 8,
                                                                      "parent_depth": 2}}
    router = build_router(parse_routing({"by": "rules", "routes": routes}), None)
    assert router is not None and max_topk(router.routes) == 8
    qs = [q("c", "Who is older, Ann or Bob?"), q("s", "Where was Ann born?")]
    decided = router.decide(qs)
    expander = SimpleNamespace(parent_depth=1)
    got = {x.qid: route_for({}, x, expander, 5, decided[x.qid].route) for x in qs}  # type: ignore[arg-type]
    assert {qid: (e.parent_depth, k) for qid, (e, k) in got.items()} == {"c": (2, 8), "s": (0, 3)}
    assert expander.parent_depth == 1  # the job's expander is copied, never changed
