"""Issues 15 and 27 in-process: stages=retrieval builds no generator, the closed-book and oracle baselines,
dataset.max_queries, the ledger's budget (a ceiling: reservations) and accounting (every role), and how
skipped cases are aggregated."""

from __future__ import annotations

import threading
import time

import pytest
from hydra import compose, initialize_config_module

from ragbench.budget import Budget, Ledger, accounting_metrics
from ragbench.build import build
from ragbench.datasets.sampling import sample
from ragbench.errors import BudgetExhaustedError, ConfigError
from ragbench.judge.aggregate import aggregate
from ragbench.outcome import check
from ragbench.pipeline import Pipeline
from ragbench.retrieval.baselines import ClosedBook, Oracle
from ragbench.types import CaseResult, Query, Usage
from tests.fixtures.toy import HashEmbedder, ToyAdapter
from tests.unit.test_pipeline import components


def composed(overrides: list[str]):
    with initialize_config_module(config_module="ragbench.conf", version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def test_stages_retrieval_builds_no_generator_or_judge():
    comps, _ = build(composed(["stages=retrieval", "llm=openai", "judge=[lexical,llm]"]))
    assert comps.generator is None and comps.judges == {}
    full, _ = build(composed([]))
    assert full.generator is not None and full.judges


def test_stages_retrieval_runs_retrieval_and_context_metrics_only():
    result = Pipeline(components(generator=None, judges={})).run()
    assert all(c.answer is None and not c.failed for c in result.cases)
    assert "retrieval/mrr_at_10" in result.metrics and "context/tokens" in result.metrics
    assert not any(k.startswith(("answer/", "judge/")) for k in result.metrics)


@pytest.mark.parametrize("value", ["generate", "none", ""])
def test_bad_stages_is_one_line(value):
    with pytest.raises(ConfigError, match="stages=.* is not valid; choose one of all, retrieval"):
        build(composed([f"stages={value}"]))


def test_oracle_contexts_hold_all_matched_evidence():
    result = Pipeline(components(retriever=Oracle())).run()
    matched = [c for c in result.cases if "context/evidence_text_recall" in c.scores]
    assert matched and all(c.scores["context/evidence_text_recall"] == 1.0 for c in matched)


def test_closed_book_has_no_context():
    result = Pipeline(components(retriever=ClosedBook())).run()
    assert all(c.contexts == () and c.scores["context/tokens"] == 0 for c in result.cases)
    assert result.metrics["context/tokens"] == 0 and result.counts["embedded_texts"] == 0


@pytest.mark.parametrize("retrieval", ["none", "oracle"])
def test_baselines_compose_and_sweep_beside_real_retrievers(retrieval):
    comps, _ = build(composed([f"retrieval={retrieval}"]))
    assert comps.retriever.baseline in ("closed_book", "oracle")


def test_max_queries_keeps_the_first_n_in_file_order():
    ev = ToyAdapter().load()
    docs, queries = sample(ev.documents, ev.queries, num_docs=None, sample_size=None, stratify=False, seed=1,
                           max_queries=2)
    assert [q.qid for q in queries] == [q.qid for q in ev.queries][:2] and len(docs) == len(ev.documents)


@pytest.mark.parametrize(("value", "message"), [
    (0, "dataset.max_queries must be >= 1"), (-2, "dataset.max_queries must be >= 1"),
    ("3", "dataset.max_queries must be a whole number"), (True, "dataset.max_queries must be a whole number"),
])
def test_bad_max_queries_is_one_line(value, message):
    ev = ToyAdapter().load()
    with pytest.raises(ConfigError, match=message):
        sample(ev.documents, ev.queries, num_docs=None, sample_size=None, stratify=False, seed=1, max_queries=value)


def test_max_queries_composes_for_every_dataset():
    comps, _ = build(composed(["dataset=qasper", "dataset.max_queries=2"]))
    assert len(comps.dataset.load().queries) == 2


@pytest.mark.parametrize(("node", "message"), [
    ({"max_calls": -1}, "budget.max_calls must be a number >= 0"),
    ({"max_usd": "ten"}, "budget.max_usd must be a number >= 0"),
    ({"max_minutes": True}, "budget.max_minutes must be a number >= 0"),
    ({"scope": "run"}, "budget.scope='run' is not valid"),
])
def test_bad_budget_is_one_line(node, message):
    with pytest.raises(ConfigError, match=message):
        Budget.from_config(node)


def test_ledger_admits_n_calls_then_stops_and_books_cache_hits_as_saved():
    ledger = Ledger()
    ledger.start_job(Budget(max_calls=2, scope="job"))
    before = ledger.snapshot()
    for _ in range(2):
        ledger.admit()
        ledger.record("llm", Usage(prompt_tokens=10, completion_tokens=2, cost_usd=0.5))
    ledger.record("judge", Usage(prompt_tokens=7, completion_tokens=1, cost_usd=0.25, cached=True))
    with pytest.raises(BudgetExhaustedError, match=r"budget.max_calls=2 reached \(2 LLM requests sent"):
        ledger.admit()
    m = accounting_metrics(before, ledger.snapshot())
    assert m["tokens/generation_total"] == 24 and m["cost/generation_usd"] == 1.0 and m["llm/calls_total"] == 2
    assert m["tokens/judge_total"] == 0 and m["saved/judge_tokens"] == 8 and m["saved/usd_total"] == 0.25
    assert m["tokens/total"] == 24 and m["cost/usd_total"] == 1.0
    ledger.start_job(Budget(max_calls=2, scope="job"))  # a job budget starts again for the next job
    ledger.admit()


def test_skipped_cases_are_neither_scored_nor_failed():
    q = [Query(qid=f"q{i}", text="?", answers=("a",), question_type="t") for i in range(3)]
    cases = [CaseResult(query=q[0], hits=(), contexts=(), answer=None, scores={"answer/f1": 1.0}),
             CaseResult(query=q[1], hits=(), contexts=(), answer=None, scores={}, status="skipped",
                        error_type="BudgetExhaustedError", error="budget.max_calls=1 reached"),
             CaseResult(query=q[2], hits=(), contexts=(), answer=None, scores={}, status="skipped")]
    m = aggregate(cases)
    assert m["answer/f1"] == 1.0 and m["cases/total"] == 1 and m["cases/skipped"] == 2 and m["cases/failed"] == 0
    check(cases, 0.0)  # skipped cases are not failures: a strict gate still passes


class _SlowLoading(HashEmbedder):
    """A model whose one-off load takes LOAD_S (sentence-transformers' ``load``/``loaded`` shape)."""

    def __init__(self) -> None:
        super().__init__()
        self.loaded = False

    def load(self) -> None:
        time.sleep(LOAD_S)
        self.loaded = True


LOAD_S = 0.3


def test_model_loading_is_timed_apart_from_embedding_and_search():
    result = Pipeline(components(embedder=_SlowLoading())).run()
    assert result.metrics["latency/model_load_ms"] >= LOAD_S * 1000
    assert result.timings["embed"] + result.timings.get("embed_queries", 0.0) < LOAD_S  # the load is not in them
    assert result.metrics["latency/search_mean_ms"] < LOAD_S * 1000 / 3  # three queries: not a share of the load


@pytest.mark.parametrize(("budget", "spend", "message"), [
    (Budget(max_usd=1.0, scope="job"), 2, r"budget.max_usd=1 reached \(\$1.0000 spent"),
    (Budget(max_minutes=0, scope="job"), 0, r"budget.max_minutes=0 reached"),
    (Budget(max_calls=0, scope="job"), 0, r"budget.max_calls=0 reached \(0 LLM requests sent"),
])
def test_each_budget_limit_stops_the_next_request(budget, spend, message):
    ledger = Ledger()
    ledger.start_job(budget)
    for _ in range(spend):
        ledger.admit()
        ledger.record("embedder", Usage(prompt_tokens=5, cost_usd=0.5))
    with pytest.raises(BudgetExhaustedError, match=message):
        ledger.admit()


def test_a_sweep_budget_spans_jobs():
    ledger = Ledger()
    for _ in range(2):
        ledger.start_job(Budget(max_calls=2))
        ledger.admit()
        ledger.record("llm", Usage(prompt_tokens=1))
    ledger.start_job(Budget(max_calls=2))
    with pytest.raises(BudgetExhaustedError, match="budget.scope=sweep"):
        ledger.admit()


def test_requests_in_flight_count_against_max_calls():
    """Issue 27: the budget is a ceiling: reserved requests count before any reply has been booked."""
    ledger = Ledger()
    ledger.start_job(Budget(max_calls=2, scope="job"))
    held = [ledger.reserve(), ledger.reserve()]  # two requests in flight, nothing settled yet
    with pytest.raises(BudgetExhaustedError, match=r"budget.max_calls=2 reached \(2 LLM requests sent"):
        ledger.reserve()
    ledger.settle("llm", Usage(prompt_tokens=3, completion_tokens=1), held[0])
    ledger.settle("llm", Usage(), held[1])  # an attempt that got no reply (a 429): one call, no tokens
    spent = ledger.snapshot()["spent"]["llm"]
    assert (spent["calls"], spent["prompt_tokens"], spent["completion_tokens"]) == (2, 3, 1)


def test_max_usd_reserves_each_requests_maximum_cost_and_settles_to_the_real_one():
    ledger = Ledger()
    ledger.start_job(Budget(max_usd=1.0, scope="job"))
    first = ledger.reserve(0.6)  # $0.60 held: a second $0.60 request fits only once this one settles
    admitted = threading.Event()

    def second() -> None:
        held = ledger.reserve(0.6)
        admitted.set()
        ledger.settle("judge", Usage(cost_usd=0.3), held)

    waiter = threading.Thread(target=second)
    waiter.start()
    assert not admitted.wait(0.2)  # $0.60 + $0.60 held would pass $1: it waits, it is not sent
    ledger.settle("llm", Usage(cost_usd=0.3), first)  # the real cost: $0.30 spent, nothing held
    waiter.join(5)
    assert admitted.is_set()
    with pytest.raises(BudgetExhaustedError, match=r"budget.max_usd=1 reached \(\$0.6000 spent; the next request "
                                                   r"could cost up to \$0.5000"):
        ledger.reserve(0.5)  # $0.60 spent + $0.50 at most > $1: never sent, whatever it would cost
    m = accounting_metrics({"spent": {}, "saved": {}}, ledger.snapshot())
    assert m["cost/usd_total"] == pytest.approx(0.6) and m["llm/calls_total"] == 2


def test_every_role_is_accounted_query_rewriting_and_unknown_roles_included():
    ledger = Ledger()
    before = ledger.snapshot()
    ledger.settle("query.transform.client", Usage(prompt_tokens=40, completion_tokens=9, cost_usd=0.01),
                  ledger.reserve())
    ledger.record("critic", Usage(prompt_tokens=5, completion_tokens=1, cost_usd=0.02))
    ledger.record("query.transform.client", Usage(prompt_tokens=4, cached=True))
    m = accounting_metrics(before, ledger.snapshot())
    assert (m["llm/query_calls"], m["tokens/query_prompt"], m["tokens/query_completion"], m["cost/query_usd"]) == (
        1, 40, 9, 0.01)
    assert m["saved/query_calls"] == 1 and m["saved/query_tokens"] == 4
    assert m["llm/critic_calls"] == 1 and m["tokens/critic_total"] == 6
    assert m["llm/calls_total"] == 2 and m["tokens/total"] == 55 and m["cost/usd_total"] == pytest.approx(0.03)
