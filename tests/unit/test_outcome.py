"""A job's outcome: max_failure_rate validated and applied, the breaker's line reported, preflight order."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from ragbench.errors import ConfigError, JobFailedError, ModelLoadError
from ragbench.llm.errors import LLMCircuitOpenError
from ragbench.outcome import DEFAULT_MAX_FAILURE_RATE, check, max_failure_rate, preflight, zero_scores
from ragbench.types import CaseResult, Query


def _case(i: int, failed: bool, error_type: str = "LLMServerError", error: str = "boom\n  fix: x") -> CaseResult:
    return CaseResult(query=Query(qid=f"q{i}", text="?", answers=("a",), question_type="t"), hits=(), contexts=(), answer=None,
                      scores={}, status="failed" if failed else "ok", error_type=error_type if failed else None,
                      error=error if failed else None)


@pytest.mark.parametrize("value", [-0.1, 1.01, math.nan, math.inf, "half", True, None])
def test_bad_max_failure_rate_is_a_named_config_error(value):
    with pytest.raises(ConfigError, match=r"^max_failure_rate=.* is not valid: use a finite number in \[0, 1\] \(default: max_failure_rate=0\.5\)$"):
        max_failure_rate({"max_failure_rate": value})


@pytest.mark.parametrize("value,expected", [(0, 0.0), (0.25, 0.25), (1, 1.0)])
def test_good_max_failure_rate(value, expected):
    assert max_failure_rate({"max_failure_rate": value}) == expected


def test_the_default_fails_an_all_failed_job():
    assert max_failure_rate({}) == DEFAULT_MAX_FAILURE_RATE < 1.0
    with pytest.raises(JobFailedError):
        check([_case(i, True) for i in range(3)], max_failure_rate({}))


@pytest.mark.parametrize("failed,limit,fails", [(0, 0.0, False), (1, 0.0, True), (2, 0.5, False), (3, 0.5, True),
                                                (4, 1.0, False)])
def test_only_a_rate_above_the_limit_fails(failed, limit, fails):
    cases = [_case(i, i < failed) for i in range(4)]
    if not fails:
        check(cases, limit)
        return
    with pytest.raises(JobFailedError) as info:
        check(cases, limit)
    text = str(info.value)
    assert f"{failed} of 4 cases failed (failure rate {failed / 4:.3f} > max_failure_rate={limit:g})" in text
    assert "case q0: LLMServerError: boom fix: x" in text and "raise max_failure_rate" in text
    assert "\n" not in text


def test_a_tripped_breaker_fails_the_job_whatever_the_rate():
    cases = [_case(0, True, "LLMCircuitOpenError", "llm model 'm' at http://x: 5 calls in a row failed; fix: y"),
             *[_case(i, False) for i in range(1, 10)]]
    with pytest.raises(LLMCircuitOpenError, match=r"^llm model 'm' at http://x: 5 calls in a row"):
        check(cases, 0.5)
    check([], 0.0)  # no cases: nothing failed


def test_zero_scores_cover_the_declared_keys():
    judges = [SimpleNamespace(score_keys=("answer/f1", "answer/em")), SimpleNamespace(score_keys=())]  # every Judge declares its keys
    assert zero_scores(judges) == {"answer/em": 0.0, "answer/f1": 0.0}


def test_preflight_checks_each_component_once_in_order_and_stops_at_the_first_failure():
    calls: list[str] = []

    def part(name, needs_vectors=False, error=None):
        def run():
            calls.append(name)
            if error:
                raise error
        return SimpleNamespace(preflight=run, needs_vectors=needs_vectors)

    components = SimpleNamespace(embedder=part("embedder"), retriever=SimpleNamespace(needs_vectors=False),
                                 rerankers=[part("cross_encoder", error=ModelLoadError("no weights"))],
                                 generator=part("generator"), judges={"llm": part("judge")}, query=None)
    with pytest.raises(ModelLoadError, match="no weights"):
        preflight(components)
    assert calls == ["cross_encoder"]  # bm25 needs no embedder; the reranker fails before any LLM call
    calls.clear()
    components.rerankers = []
    components.retriever.needs_vectors = True
    preflight(components)
    assert calls == ["embedder", "generator", "judge"]


def test_a_rate_at_the_limit_keeps_the_job_and_says_so(caplog):
    """3 of 6 failed at max_failure_rate=0.5: FINISHED, no longer silently (issue 47: LLMTimeoutError x3)."""
    cases = [_case(i, i < 3, "LLMTimeoutError") for i in range(6)]
    with caplog.at_level("WARNING", logger="ragbench.outcome"):
        check(cases, 0.5)
    assert len(caplog.records) == 1
    line = caplog.records[0].getMessage()
    assert "3 of 6 cases failed: failure rate 0.500 = max_failure_rate=0.5, at the limit" in line
    assert "lower max_failure_rate" in line and "\n" not in line
    caplog.clear()
    with caplog.at_level("WARNING", logger="ragbench.outcome"):
        check([_case(i, i < 2) for i in range(6)], 0.5)  # below the limit: nothing to say
        check([_case(i, True) for i in range(6)], 1.0)  # max_failure_rate=1 keeps every job, as documented
        check([_case(i, False) for i in range(6)], 0.0)
    assert not caplog.records
