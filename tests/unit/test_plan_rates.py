"""plan=true's wall time: LLM request rates keyed by role, model and prompt size, never borrowed from a key
that merely contains the model name (issue 47: 1,131 s predicted against 507 s actual)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragbench.plan import cli
from ragbench.plan.predict import JobPlan, RoleBill
from ragbench.plan.rates import llm_rate_key, llm_rates
from ragbench.types import Answer, CaseResult, Query, Usage


def test_rate_keys_name_role_model_and_prompt_bucket():
    assert llm_rate_key("judge", "openai/m", 300) == "llm judge openai/m prompt<=512w"
    assert llm_rate_key("judge", "openai/m", 512) == llm_rate_key("judge", "openai/m", 257)
    assert llm_rate_key("judge", "openai/m", 513) != llm_rate_key("judge", "openai/m", 512)
    assert llm_rate_key("generation", "openai/m", 300) != llm_rate_key("judge", "openai/m", 300)
    assert llm_rate_key("generation", "openai/m", 0) == "llm generation openai/m prompt<=1w"


def _plan(role: str, model: str, calls: int, words_per_call: int) -> JobPlan:
    plan = JobPlan(job="j", dataset="qasper", questions=calls, ingest="i", ingest_cached=True, texts_to_embed=0,
                   embedder="none", baseline=None, exact_contexts=False)
    plan.roles[role] = RoleBill(model=model, calls=calls, prompt_tokens=float(calls * words_per_call))
    return plan


@pytest.fixture(autouse=True)
def _no_litellm(monkeypatch):
    monkeypatch.setattr(cli, "_price", lambda model, prompt, completion: None)


def test_the_judge_never_borrows_the_generators_or_another_datasets_rate():
    rates = {
        # the generator's rate on the same model, and an old identity-keyed entry naming it
        llm_rate_key("generation", "openai/smollm2", 1700): {"s_per_call": 20.0},
        "openai/smollm2(prompt=abc,temperature=0.0,dataset=locomo)": {"s_per_call": 30.0, "completion_tokens": 9},
    }
    plan = cli.summarize([_plan("judge", "openai/smollm2", 12, 300)], rates)
    assert plan["wall_seconds"] == 0.0
    assert plan["wall_unknown"] == ["seconds per judge request of openai/smollm2 (prompt<=512w)"]
    rates[llm_rate_key("judge", "openai/smollm2", 400)] = {"s_per_call": 0.8}
    plan = cli.summarize([_plan("judge", "openai/smollm2", 12, 300)], rates)
    assert plan["wall_seconds"] == pytest.approx(12 * 0.8) and not plan["wall_unknown"]
    plan = cli.summarize([_plan("judge", "openai/smollm2", 12, 1500)], rates)  # a longer prompt: another rate
    assert plan["wall_unknown"] == ["seconds per judge request of openai/smollm2 (prompt<=2048w)"]


class _Gen:
    identity, model = "gen(x)", "openai/gen"

    def prompts(self, query, contexts):
        return [[{"role": "user", "content": "w " * 300}]]


class _Judge:
    identity, model = "judge(x)", "openai/judge"
    score_keys = ("judge/accuracy",)

    def prompts(self, query, contexts, answer):
        return [[{"role": "user", "content": "w " * 100}]] * 2


def _case(i: int, cached: bool) -> CaseResult:
    answer = Answer(text="a", model="openai/gen", latency_s=2.0, usage=Usage(completion_tokens=5, cached=cached))
    return CaseResult(query=Query(qid=f"q{i}", text="?", answers=("a",), question_type="t"), hits=(), contexts=(), answer=answer,
                      scores={}, latency={"judge": 3.0})


def test_a_job_records_its_generator_and_judge_rates_under_their_own_keys():
    components = SimpleNamespace(generator=_Gen(), judges={"llm": _Judge()})
    result = SimpleNamespace(cases=[_case(0, False), _case(1, False), _case(2, True)],
                             metrics={"llm/judge_calls": 4.0})
    rates = llm_rates(components, result)
    gen, judge = llm_rate_key("generation", "openai/gen", 300), llm_rate_key("judge", "openai/judge", 100)
    assert set(rates) == {gen, judge}
    assert rates[gen]["s_per_call"] == 2.0 and rates[gen]["calls"] == 2  # the cached answer sent nothing
    assert rates[judge]["s_per_call"] == pytest.approx(9.0 / 4)  # judge time over the requests sent
