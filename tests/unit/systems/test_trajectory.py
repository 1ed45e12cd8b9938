"""An outside system's trajectory (issue 42, docs/multi-step.md): each retrieval step scored as a hop, its
contexts matched like the answer's (an unmatched one counted), a bad step one named line, and the case's
per-hop scores the ones verify recomputes from its record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragbench.cache.store import StageCache
from ragbench.components import Components
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.judge.hops import scores_from_record
from ragbench.judge.lexical import LexicalJudge
from ragbench.pipeline import Pipeline
from ragbench.record import case_record
from ragbench.systems.components import SystemExpander, SystemGenerator, SystemRetriever, system_metrics
from ragbench.systems.records import RecordError, parse_record
from ragbench.systems.responses import ResponsesSource, read_responses
from tests.fixtures.toy import ToyAdapter

OK = {"qid": "q1", "answer": "Tom", "contexts": [{"id": "A1", "text": "Alice adopted a cat."}]}


def _write(tmp_path: Path, lines: list[Any]) -> Path:
    path = tmp_path / "out.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.parametrize(("trajectory", "message"), [
    ([{"query": "cat", "contexts": []}],
     r"trajectory\[0\]: the step has no contexts; fix: give each retrieval step"),
    ([{"query": "cat"}], r"trajectory\[0\]: the step has no contexts"),
    ([{"contexts": [{"id": "A1"}]}], r"trajectory\[0\]: the step has no query \(a string\) or tool_call"),
    ([{"query": "cat", "contexts": [{"id": "A1"}]}, 3], r"trajectory\[1\]: a step must be an object"),
    ({"query": "cat"}, r"trajectory must be a list of steps"),
    ([{"query": "cat", "contexts": [{"score": 1}]}],
     r"trajectory\[0\], contexts\[0\]: a context needs an id"),
])
def test_a_bad_trajectory_is_one_named_line(tmp_path: Path, trajectory: Any, message: str) -> None:
    with pytest.raises(RecordError, match=message) as err:
        read_responses(_write(tmp_path, [{**OK, "trajectory": trajectory}]))
    assert "\n" not in str(err.value) and "line 1" in str(err.value)


def test_a_tool_call_step_searches_its_query_argument_and_the_record_round_trips() -> None:
    rec = parse_record({**OK, "trajectory": [
        {"tool_call": {"name": "search", "arguments": {"query": "cat name"}},
         "contexts": ["Alice adopted a cat."], "output": "1 passage"},
        {"tool_call": {"name": "lookup", "arguments": {"id": 7}}, "contexts": [{"id": "A2"}]}]}, "reply")
    assert [s.query for s in rec.trajectory] == ["cat name", 'lookup({"id": 7})']
    assert parse_record(rec.to_json(), "again") == rec


def test_each_step_is_a_hop_scored_and_recomputable_unmatched_contexts_counted(tmp_path: Path) -> None:
    path = _write(tmp_path, [
        {**OK, "trajectory": [{"query": "who adopted", "contexts": [{"text": "Nothing about it."}]},
                              {"query": "cat name",
                               "contexts": [{"id": "A1"}, {"text": "not in the corpus"}]}]},
        {"qid": "q2", "answer": "Lisbon", "contexts": [{"text": "The conference was held in Lisbon in May"}]},
        {"qid": "q3", "answer": "", "contexts": [{"id": "A2"}]},
    ])
    source = ResponsesSource(path=str(path))
    c = Components(dataset=ToyAdapter(), chunker=HierarchicalChunker(), embedder=None,
                   retriever=SystemRetriever(source=source), topk=2, rerankers=[], candidates=0,
                   expander=SystemExpander(source=source), generator=SystemGenerator(source=source),
                   judges={"lexical": LexicalJudge()})
    result = Pipeline(c, cache=StageCache(mode="off")).run()
    q1, q2, _ = result.cases
    hops = q1.trace["hops"]
    assert [h["query"] for h in hops] == ["who adopted", "cat name"]
    assert {h["source"] for h in hops} == {"trajectory"}
    assert hops[0]["ranked_ids"] == [] and len(hops[1]["ranked_ids"]) == 1  # unmatched contexts rank nothing
    assert q1.scores["retrieval/hop/used"] == 2 and q1.scores["retrieval/hop/recall_hop_1"] == 0.0
    assert q1.scores["retrieval/hop/coverage"] == 1.0 and q1.scores["retrieval/hop/redundant_rate"] == 0.5
    assert [h["query"] for h in q2.trace["hops"]] == [q2.query.text]  # no trajectory: the question, one hop
    row = case_record(q1, result.tree, result.evidence["q1"], dataset="toy", topk=2).row()
    assert scores_from_record(row) == {k: v for k, v in q1.scores.items() if k.startswith("retrieval/hop/")}
    got = system_metrics(c.retriever)
    assert got["system/trajectory_steps"] == 2 and got["system/trajectory_contexts"] == 3
    assert got["system/trajectory_contexts_unmatched"] == 2
