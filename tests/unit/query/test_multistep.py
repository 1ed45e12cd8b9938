"""Multi-step retrieval (issue 42): the rules decomposer, the merges, per-hop scores and their
recomputation from a case line, the iteration and the adaptive decision, and the ``iterate`` wave of a
toy job: every case's next-query request goes out in one batch per round."""

from __future__ import annotations

from typing import Any

import pytest

from ragbench.budget import Budget
from ragbench.errors import ConfigError, JobStopped
from ragbench.judge.hops import HopInput, hop_scores, record_hops, scores_from_record
from ragbench.llm.batch import BatchReply
from ragbench.llm.client import LLMClient
from ragbench.llm.replies import Completion
from ragbench.pipeline import Pipeline
from ragbench.query.decompose import decomposer, parse_subquestions, split_rules
from ragbench.query.multistep import (
    ENOUGH,
    MultiStep,
    adapt,
    iterate,
    merged,
    multistep_options,
    parse_next,
    records_hops,
)
from ragbench.query.plan import QueryPlan, interleave
from ragbench.session import LEDGER
from ragbench.types import Answer, Hit, Query, Usage
from tests.fixtures.toy import toy_components

Q = Query(qid="q", text="Who is older, Ann Lee or Bob Stone?", answers=("Ann",), question_type="comparison")


def hits(*ids: str) -> list[Hit]:
    return [Hit(cid, 1.0 / (n + 1), n + 1) for n, cid in enumerate(ids)]


def test_rules_split_comparisons_and_clauses_and_keep_a_simple_question() -> None:
    assert split_rules(Q.text) == ("Who is older Ann Lee?", "Who is older Bob Stone?")
    assert split_rules("Did the Ledger report a rise in sales while the Wire reported a fall?") == (
        "Did the Ledger report a rise in sales?", "Did the Wire reported a fall?")
    assert split_rules("What did Alice buy and where did she travel in May?") == (
        "What did Alice buy?", "where did she travel in May?")
    assert split_rules("What is the capital of France?") == ("What is the capital of France?",)
    assert len(split_rules("A b c and who d e; what f g; why h i; how j k; when l m?", n=3)) == 3


def test_llm_sub_questions_are_parsed_and_the_question_stands_alone_without_any() -> None:
    assert parse_subquestions("Q?", "1. Who is Ann?\n- Who is Bob?\n\nwho is ann?", 4) == ("Who is Ann?",
                                                                                         "Who is Bob?")
    assert parse_subquestions("Q?", "  \n", 4) == ("Q?",)
    assert parse_subquestions("Q?", "a\nb\nc", 2) == ("a", "b")


def test_decomposer_options_are_checked_in_one_line_and_rules_builds_no_model() -> None:
    rules = decomposer(decomposer="rules", merge="interleave")
    assert rules.variants(Q) == split_rules(Q.text) and rules.merge == "interleave" and rules.spent("q") == 0
    with pytest.raises(ConfigError, match="query.merge='mean' is not known"):
        decomposer(decomposer="rules", merge="mean")
    with pytest.raises(ConfigError, match="query.decomposer='split' is not known"):
        decomposer(decomposer="split")
    with pytest.raises(ConfigError, match="needs query.transform.client"):
        decomposer(decomposer="llm")


def test_interleave_takes_turns_keeps_each_chunk_once_and_plan_fuse_uses_the_merge() -> None:
    a, b = hits("x", "y", "z"), hits("y", "w")
    assert [h.chunk_id for h in interleave([a, b], 10)] == ["x", "y", "w", "z"]
    assert [h.rank for h in interleave([a, b], 3)] == [1, 2, 3]
    plan = QueryPlan(variants=(("s1", "s2"),), merge="interleave")
    fused, votes = plan.fuse([a, b], 4)
    assert [h.chunk_id for h in fused[0]] == ["x", "y", "w", "z"] and votes[0]["y"] == 2
    rrf, _ = QueryPlan(variants=(("s1", "s2"),)).fuse([a, b], 4)
    assert rrf[0][0].chunk_id == "y"  # in both rankings: first by RRF
    two = [HopInput("s1", a), HopInput("s2", b)]
    assert [h.chunk_id for h in merged(two, "interleave", 60, 2)] == ["x", "y"]


def test_hop_scores_recall_coverage_redundancy_and_the_closed_book_case() -> None:
    hops = [{"hit_units": [["ev0"], []], "tokens": 10, "latency_ms": 2.0},
            {"hit_units": [["ev0"]], "tokens": 20, "latency_ms": 4.0},
            {"hit_units": [[], ["ev1", "ev9"]], "tokens": 0, "latency_ms": None}]
    s = hop_scores(hops, ["ev0", "ev1", "ev2"], True)
    assert s["retrieval/hop/used"] == 3 and s["retrieval/hop/tokens"] == 10
    assert s["retrieval/hop/latency_ms"] == 3 and s["retrieval/hop/recall_hop_2"] == pytest.approx(1 / 3)
    assert s["retrieval/hop/coverage"] == pytest.approx(2 / 3)
    assert s["retrieval/hop/recall"] == pytest.approx(1 / 3)
    assert s["retrieval/hop/redundant_rate"] == pytest.approx(1 / 3)  # hop 2 found ev0 again
    assert "retrieval/hop/coverage" not in hop_scores(hops, ["ev0"], False)  # evidence not matched
    assert hop_scores([], ["ev0"], True) == {"retrieval/hop/used": 0.0, "retrieval/hop/coverage": 0.0}


def test_recorded_hops_score_the_same_as_verify_recomputes_them() -> None:
    from ragbench.evidence import EvidenceMap

    class Cov:
        def units(self, cid: str) -> tuple[str, ...]:
            return ("ev0",) if cid == "g" else ()

        def unit_qrels(self) -> dict[str, int]:
            return {"ev0": 1, "ev1": 1}

    emap = EvidenceMap(anchors=(("g",), ("h",)), relevance=(1, 1), texts=("a", "b"), how=("id", "id"))
    trace: dict[str, Any] = {}
    scores = record_hops(trace, [HopInput("s1", hits("a", "g", "c"), tokens=5, seconds=0.01)],
                         {"retrieved": True, "by": "threshold"}, emap,
                         Cov(), topk=2)  # type: ignore[arg-type]
    assert trace["hops"][0]["ranked_ids"] == ["a", "g"] and trace["hops"][0]["hit_units"] == [[], ["ev0"]]
    row = {"trace": trace, "qrels": {"unit": {"ev0": 1, "ev1": 1}}, "evidence": {"matched": True}}
    assert scores_from_record(row) == scores
    assert scores["retrieval/hop/coverage"] == 0.5 and scores["retrieval/adaptive/retrieved"] == 1.0


def test_options_are_checked_in_one_line() -> None:
    assert multistep_options({"retrieval": {"mode": "iterative", "max_hops": 5}}) == MultiStep("iterative", 5)
    assert multistep_options({}) == MultiStep()
    with pytest.raises(ConfigError, match="retrieval.mode='loop' is not known"):
        multistep_options({"retrieval": {"mode": "loop"}})
    with pytest.raises(ConfigError, match="retrieval.max_hops"):
        multistep_options({"retrieval": {"mode": "iterative", "max_hops": 0}})
    with pytest.raises(ConfigError, match="adaptive_threshold='high' is not a number"):
        multistep_options({"retrieval": {"mode": "adaptive", "adaptive_threshold": "high"}})


def test_which_jobs_record_hops() -> None:
    from ragbench.types import Evidence

    one = Query(qid="a", text="t", answers=(), question_type="x",
                evidence=(Evidence(text="e", doc_id="d1"),) * 2)
    two = Query(qid="b", text="t", answers=(), question_type="x",
                evidence=(Evidence(text="e", doc_id="d1"), Evidence(text="f", doc_id="d2")))
    assert not records_hops(MultiStep(), object(), [one])
    assert records_hops(MultiStep(), object(), [one, two])  # MultiHop-RAG's multi-article questions
    assert records_hops(MultiStep("iterative"), object(), [one])
    assert records_hops(MultiStep(), decomposer(decomposer="rules"), [one])


class Scripted:
    """A client stand-in: replies in order, each with 3 + 2 tokens."""

    def __init__(self, *replies: str | Exception) -> None:
        self.replies, self.prompts = list(replies), []

    def complete(self, messages: list[dict[str, str]]) -> Completion:
        self.prompts.append(messages[-1]["content"])
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return Completion(text=reply, model="m", usage=Usage(prompt_tokens=3, completion_tokens=2),
                          latency_s=0.0, attempts=1)


def search(text: str, query: Query) -> tuple[list[Hit], float]:
    return hits(f"{text}-1", f"{text}-2"), 0.5


def test_a_next_query_is_the_reply_s_first_line_unlabelled_and_enough_or_a_repeat_ends() -> None:
    assert parse_next('Next search query: "Ann Lee birth"\nbecause ...', []) == "Ann Lee birth"
    assert parse_next("Enough.", []) is None and parse_next("  ", []) is None
    assert parse_next("ann lee", ["Ann Lee"]) is None


def test_iteration_asks_for_next_queries_until_enough_or_max_hops() -> None:
    first = [HopInput(Q.text, hits("a", "b"), source="question")]
    client = Scripted("Query: Ann Lee birth year", ENOUGH)
    done, error = iterate(Q, first, client, search, lambda cid: f"text of {cid}", max_hops=5, topk=2)
    assert [h.query for h in done] == [Q.text, "Ann Lee birth year"] and not error
    assert done[1].tokens == 5 and done[1].source == "iterative" and done[1].seconds >= 0.5
    assert "[1] text of a" in client.prompts[0] and "- Ann Lee birth year" in client.prompts[1]
    capped, _ = iterate(Q, first, Scripted("x", "y", "z"), search, str, max_hops=2, topk=2)
    assert len(capped) == 2
    repeated, _ = iterate(Q, first, Scripted(Q.text.upper()), search, str, max_hops=3, topk=2)
    assert len(repeated) == 1  # a repeated query ends the iteration
    failed, error = iterate(Q, first, Scripted(TimeoutError("slow")), search, str, max_hops=3, topk=2)
    assert failed == first and error == "TimeoutError: slow"


def test_a_budget_stop_stops_the_job_and_adaptive_decides_by_threshold_or_the_model() -> None:
    from ragbench.errors import BudgetExhaustedError

    first = [HopInput(Q.text, hits("a"))]
    with pytest.raises(JobStopped, match="multi-step retrieval"):
        iterate(Q, first, Scripted(BudgetExhaustedError("max_calls")), search, str, max_hops=3, topk=2)
    assert adapt(Q, first, None, 0.5) == (True, {"by": "threshold", "top_score": 1.0})
    assert adapt(Q, first, None, 2.0)[0] is False
    assert adapt(Q, first, Scripted("No."), None)[0] is False
    assert adapt(Q, first, Scripted("YES"), None)[0] is True
    assert adapt(Q, first, Scripted(RuntimeError("x")), None)[0] is True  # undecided: retrieve


class NextQueryRunner:
    """A provider batch stand-in: an iteration prompt gets a next query (then ENOUGH), else an answer."""

    def __init__(self, batches: list[list[str]]) -> None:
        self.batches, self.batch_id = batches, None

    def run(self, bodies: dict[str, dict[str, Any]]) -> dict[str, BatchReply]:
        prompts = {cid: b["messages"][-1]["content"] for cid, b in bodies.items()}
        self.batches.append(sorted(p.split("\n")[0][:20] for p in prompts.values()))
        self.batch_id = f"batch_{len(self.batches)}"
        return {cid: BatchReply(ENOUGH if "- more about" in p else "more about it" if "one search" in p
                                else "an answer", Usage(prompt_tokens=2, completion_tokens=1),
                                batch_id=self.batch_id) for cid, p in prompts.items()}


class BatchedGenerator:
    identity = "batched-generator"
    max_concurrency = 4

    def __init__(self, batches: list[list[str]]) -> None:
        self.client = LLMClient(model="openai/m", api_base="http://127.0.0.1:9/v1", cache=None, batch=True)
        self.client.batch_runner = lambda **_: NextQueryRunner(batches)  # type: ignore[method-assign]

    def answer(self, query: Query, contexts: Any) -> Answer:
        reply = self.client.complete([{"role": "user", "content": query.text}])
        return Answer(text=reply.text, model="openai/m", usage=reply.usage)


def test_iterative_mode_runs_in_a_wave_one_batch_per_round_for_every_case() -> None:
    LEDGER.start_job(Budget(scope="job"))
    batches: list[list[str]] = []
    gen = BatchedGenerator(batches)
    result = Pipeline(toy_components(generator=gen, multistep=MultiStep("iterative", max_hops=3))).run()
    n = len(result.cases)
    start = "You are finding the "
    # round 1: every case's next query; round 2: every case says ENOUGH; then the answers, one batch
    assert batches[:2] == [[start] * n, [start] * n] and len(batches) == 3 and gen.client.wave is None
    for case in result.cases:
        assert [h["query"] for h in case.trace["hops"]] == [case.query.text, "more about it"]
        assert case.scores["retrieval/hop/used"] == 2 and case.trace["hops"][1]["tokens"] == 3
        assert set(case.trace["hops"][0]["ranked_ids"]) | set(case.trace["hops"][1]["ranked_ids"]) >= {
            h.chunk_id for h in case.hits[:1]}
    assert result.metrics["retrieval/hop/used"] == 2


def test_iterative_mode_without_an_llm_generator_is_one_line() -> None:
    with pytest.raises(ConfigError, match="retrieval.mode=iterative asks the generator's model"):
        Pipeline(toy_components(multistep=MultiStep("iterative"))).run()


