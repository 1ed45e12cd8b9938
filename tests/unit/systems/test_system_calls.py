"""``system=python`` and ``system=http`` against stand-ins: a fault (an error, a stall, garbage, a killed
server) fails only its case, counted and scored 0, as an LLM fault does; the breaker stops a dead endpoint;
a rerun asks only the questions that failed (replies are cached under the system's identity and params)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ragbench.cache.replies import reply_store
from ragbench.cache.store import StageCache
from ragbench.components import Components
from ragbench.errors import ConfigError
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.judge.lexical import LexicalJudge
from ragbench.pipeline import Pipeline
from ragbench.systems.components import SystemExpander, SystemGenerator, SystemRetriever, system_metrics
from ragbench.systems.http_system import HttpSystem
from ragbench.systems.python_system import PythonSystem
from ragbench.types import CaseResult
from tests.fixtures import rag_systems
from tests.fixtures.rag_systems import StandIn
from tests.fixtures.toy import ToyAdapter

CAT, TRIP, JOB = "What is the cat called?", "Where was the conference held?", "What is Carol's job?"
FAST = {"timeout": 0.5, "num_retries": 1, "backoff_s": 0.0}


@pytest.fixture()
def stand_in() -> Iterator[StandIn]:
    server = StandIn()
    yield server
    server.kill()


def _run(make: object, cache: StageCache) -> tuple[dict[str, CaseResult], dict[str, float]]:
    with reply_store(cache):  # as app.build: the clients keep their replies in the job's store
        source = make()  # type: ignore[operator]
        c = Components(dataset=ToyAdapter(), chunker=HierarchicalChunker(), embedder=None,
                       retriever=SystemRetriever(source=source), topk=2, rerankers=[], candidates=0,
                       expander=SystemExpander(source=source), generator=SystemGenerator(source=source),
                       judges={"lexical": LexicalJudge()})
    result = Pipeline(c, cache=cache).run()
    return {case.query.text: case for case in result.cases}, {**result.metrics, **system_metrics(c.retriever)}


def test_http_faults_are_counted_cases_and_a_rerun_repeats_no_call(stand_in: StandIn, tmp_path: Path) -> None:
    cache = StageCache(dir=str(tmp_path / "cache"))
    stand_in.behaviour.update({TRIP: "garbage", JOB: "stall"})
    cases, metrics = _run(lambda: HttpSystem(url=stand_in.url, params={"top_k": 2}, **FAST), cache)
    assert cases[CAT].status == "ok" and cases[CAT].scores["answer/em"] == 1.0
    assert (cases[TRIP].status, cases[TRIP].error_type) == ("failed", "LLMResponseError")
    assert (cases[JOB].status, cases[JOB].error_type) == ("failed", "LLMTimeoutError")
    assert stand_in.calls == {CAT: 1, TRIP: 2, JOB: 2}  # each fault retried once (num_retries=1)
    assert metrics["answer/em"] == pytest.approx(1 / 3) and metrics["system/failed"] == 2.0
    assert metrics["system/contexts_matched_exact"] == 1.0 and metrics["system/contexts_unmatched"] == 1.0

    stand_in.behaviour.clear()  # the faults are gone: the rerun asks only the two failed questions
    cases, metrics = _run(lambda: HttpSystem(url=stand_in.url, params={"top_k": 2}, **FAST), cache)
    assert all(case.status == "ok" for case in cases.values())
    assert stand_in.calls == {CAT: 1, TRIP: 3, JOB: 3}
    cases, _ = _run(lambda: HttpSystem(url=stand_in.url, params={"top_k": 3}, **FAST), cache)  # other params: asked
    assert stand_in.calls == {CAT: 2, TRIP: 4, JOB: 4}


def test_a_killed_server_opens_the_breaker_once(stand_in: StandIn, tmp_path: Path) -> None:
    stand_in.kill()
    cases, _ = _run(lambda: HttpSystem(url=stand_in.url, max_consecutive_failures=2, max_concurrency=1, **FAST),
                    StageCache(mode="off"))
    errors = [case.error_type for case in cases.values()]
    assert all(case.failed for case in cases.values())
    assert errors.count("LLMConnectionError") == 1 and errors.count("LLMCircuitOpenError") == 2


def test_python_errors_are_retried_then_counted_and_resumed(tmp_path: Path) -> None:
    rag_systems.CALLS.clear()
    rag_systems.BEHAVIOUR.clear()
    rag_systems.BEHAVIOUR.update({CAT: "flaky", TRIP: "error"})
    cache = StageCache(dir=str(tmp_path / "cache"))
    target = "tests.fixtures.rag_systems:answer"
    cases, metrics = _run(lambda: PythonSystem(target=target, **FAST), cache)
    assert cases[CAT].status == "ok"  # failed once, retried
    assert (cases[TRIP].status, cases[TRIP].error_type) == ("failed", "SystemFunctionError")
    assert "backend failed" in (cases[TRIP].error or "")
    assert rag_systems.CALLS == {CAT: 2, TRIP: 2, JOB: 1}
    rag_systems.BEHAVIOUR.clear()
    cases, _ = _run(lambda: PythonSystem(target=target, **FAST), cache)
    assert all(case.status == "ok" for case in cases.values()) and rag_systems.CALLS == {CAT: 2, TRIP: 3, JOB: 1}


def test_a_spent_budget_skips_the_questions_it_cannot_pay_for(tmp_path: Path) -> None:
    from ragbench.budget import Budget
    from ragbench.session import LEDGER

    rag_systems.CALLS.clear()
    rag_systems.BEHAVIOUR.clear()
    LEDGER.start_job(Budget(max_calls=1, scope="job"))
    try:
        cases, _ = _run(lambda: PythonSystem(target="tests.fixtures.rag_systems:answer", max_concurrency=1, **FAST),
                        StageCache(mode="off"))
    finally:
        LEDGER.start_job(Budget(scope="job"))
    assert sorted(case.status for case in cases.values()) == ["ok", "skipped", "skipped"]
    assert sum(rag_systems.CALLS.values()) == 1


def test_config_mistakes_are_one_line() -> None:
    with pytest.raises(ConfigError, match=r"system.params.depth is not a parameter of .*answer"):
        PythonSystem(target="tests.fixtures.rag_systems:answer", params={"depth": 3})
    with pytest.raises(ConfigError, match=r"cannot import 'no_such_pkg.rag'"):
        PythonSystem(target="no_such_pkg.rag:answer")
    with pytest.raises(ConfigError, match=r"system=http needs system.url"):
        HttpSystem(url="localhost:8000")
