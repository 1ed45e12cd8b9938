"""Question-type routing on hand-worked examples: parsing, per-type top-k and parent depth, the tag."""

from __future__ import annotations

import pytest

from ragbench.errors import ConfigError
from ragbench.expand import ParentExpander
from ragbench.routing import Route, max_topk, parse_routes, parse_routing, route_for, routing_tag
from ragbench.types import Query


def q(qtype: str) -> Query:
    return Query(qid="q", text="?", answers=("a",), question_type=qtype)


def test_routes_pick_topk_and_parent_depth_by_gold_type() -> None:
    routes = parse_routes({"by": "gold_type", "by_type": {"Temporal": {"topk": 10}, "multi_hop": {"parent_depth": 2}}})
    assert routes == {"temporal": Route(topk=10), "multi_hop": Route(parent_depth=2)}
    job = ParentExpander(parent_depth=1)
    exp, k = route_for(routes, q("temporal"), job, 5)
    assert exp is job and k == 10
    exp, k = route_for(routes, q("multi_hop"), job, 5)
    assert exp.parent_depth == 2 and job.parent_depth == 1 and k == 5  # a copy: the job's expander unchanged
    assert route_for(routes, q("single_hop"), job, 5) == (job, 5)
    assert max_topk(routes) == 10 and max_topk({}) == 0
    assert routing_tag(routes) == {"ragbench.routing": "by gold question type (analysis, not a deployed "
                                   "classifier): multi_hop(parent_depth=2) temporal(topk=10)"}
    assert routing_tag({}) == {} and parse_routes(None) == {}
    by_rules = parse_routing({"by": "rules", "routes": {"single": {}, "decompose": {"query": "decompose"},
                                                         "iterative": {"mode": "iterative"}}})
    assert routing_tag({}, by_rules) == {"ragbench.routing": "by the rules classifier (routing.by=rules): "
                                         "decompose(query=decompose) iterative(mode=iterative) single()"}


@pytest.mark.parametrize(("node", "message"), [
    ({"by": "classifier"}, "routing.by='classifier' is not supported"),
    ({"by_type": {"temporal": {"retriever": "bm25"}}}, "routing.by_type.temporal.retriever is not routable"),
    ({"by_type": {"temporal": {"topk": 0}}}, "routing.by_type.temporal.topk=0 is not valid: use an integer >= 1"),
    ({"by_type": {"temporal": {"parent_depth": 5}}}, "routing.by_type.temporal.parent_depth=5 is not valid: use an integer in \\[0, 3\\]"),
    ({"by_type": {"temporal": 10}}, "routing.by_type.temporal must hold settings"),
])
def test_bad_routing(node: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_routes(node)
