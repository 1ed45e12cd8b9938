"""Issue 27 items 1-3 in-process against the loopback server's own request counts, with every request's
first attempt refused (429, retried): ``budget.max_calls=N`` sends exactly N HTTP requests at
``max_concurrency`` 1 and 8, ``max_usd`` is a ceiling, the rerun with a larger budget sends exactly the
uninterrupted total minus what was already sent (replies that arrived after the stop are kept), and the
ledger's calls per role (generator, judge, query rewriting) are the server's."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ragbench.budget import Budget, accounting_metrics
from ragbench.errors import BudgetExhaustedError
from ragbench.llm.client import LLMClient
from ragbench.session import LEDGER
from tests.fixtures.llm_server import LLMServer, Step

QUESTIONS = 4
ROLE_MODELS = {"generation": "gen-model", "judge": "judge-model", "query": "query-model"}


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "none")  # the loopback server needs no key; litellm wants one
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture()
def ledger() -> Iterator[Any]:
    """The process ledger, given a job budget by the test and left unlimited and not stopped after it."""
    yield LEDGER
    LEDGER.start_job(Budget(scope="job"))


def first_attempt_refused(server: LLMServer) -> None:
    """Every distinct request is refused with a 429 on its odd attempts (the first, and the first of a
    rerun's retry), answered on the even ones: a retried request is two HTTP requests, in any order."""
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def rule(body: dict[str, Any]) -> Step | None:
        key = json.dumps(body, sort_keys=True)
        with lock:
            seen[key] += 1
            odd = seen[key] % 2 == 1
        return Step(status=429) if odd else None

    server.rule = rule


def _client(server: LLMServer, concurrency: int, **kw: Any) -> LLMClient:
    args: dict[str, Any] = {"model": "openai/m", "api_base": server.url, "api_key_env": "OPENAI_API_KEY",
                            "num_retries": 2, "backoff_s": 0.0, "timeout": 10.0, "max_concurrency": concurrency,
                            "cache": None}
    return LLMClient(**{**args, **kw})


def _ask_all(client: LLMClient, prompts: list[str]) -> list[str | None]:
    """Each prompt from 8 threads at once; None where the budget refused it."""
    def one(prompt: str) -> str | None:
        try:
            return client.complete([{"role": "user", "content": prompt}]).text
        except BudgetExhaustedError:
            return None

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(one, prompts))


@pytest.mark.parametrize("concurrency", [1, 8])
def test_max_calls_sends_exactly_n_requests_retries_included(llm_server, ledger, concurrency):
    llm_server.delay_s = 0.05  # replies overlap: up to `concurrency` requests are in flight at the stop
    first_attempt_refused(llm_server)
    ledger.start_job(Budget(max_calls=7, scope="job"))
    before = ledger.snapshot()
    replies = _ask_all(_client(llm_server, concurrency), [f"question {i}" for i in range(20)])
    assert llm_server.count == 7
    answered = sum(r is not None for r in replies)
    if concurrency == 1:
        assert answered == 3  # 429 + 200 each, then the 7th request a 429 whose retry was refused
    else:
        assert answered <= 3  # the first attempts in flight together hold the budget their retries needed
    assert accounting_metrics(before, ledger.snapshot())["llm/calls_total"] == 7
    assert ledger.stopped == "budget.max_calls=7 reached (7 LLM requests sent, budget.scope=job)"


@pytest.mark.parametrize("concurrency", [1, 8])
def test_max_usd_is_a_ceiling_reserving_each_requests_maximum_cost(llm_server, ledger, concurrency):
    from ragbench.llm.loader import litellm

    lib = litellm()
    model, max_tokens = "openai/gpt-4o-mini", 50  # priced by litellm's offline map: $0.15 / $0.60 per 1M
    prompts = [f"question {chr(97 + i)} about money" for i in range(20)]
    messages = [[{"role": "user", "content": p}] for p in prompts]
    counted = {lib.token_counter(model=model, messages=m) for m in messages}
    assert len(counted) == 1
    bound = sum(lib.cost_per_token(model=model, prompt_tokens=counted.pop(), completion_tokens=max_tokens))
    real = 4 * 0.15e-6 + 2 * 0.60e-6  # the server counts words: 4 prompt words, the reply "Not mentioned"
    assert real < bound
    cap = bound + 4.5 * real  # request n+1 is sent while n * real + bound <= cap: n = 5 requests
    llm_server.delay_s = 0.05
    ledger.start_job(Budget(max_usd=cap, scope="job"))
    before = ledger.snapshot()
    replies = _ask_all(_client(llm_server, concurrency, model=model, max_tokens=max_tokens, num_retries=0), prompts)
    spent = accounting_metrics(before, ledger.snapshot())
    assert llm_server.count == 5 and sum(r is not None for r in replies) == 5
    assert spent["cost/usd_total"] == pytest.approx(5 * real) and spent["cost/usd_total"] <= cap
    assert ledger.stopped is not None and ledger.stopped.startswith(f"budget.max_usd={cap:g} reached")


def _overrides(server: LLMServer, cache_dir: Path, concurrency: int) -> list[str]:
    url = server.url
    retry = ["num_retries=2", "backoff_s=0", f"max_concurrency={concurrency}", "api_key_env=OPENAI_API_KEY"]
    return [
        "dataset=locomo", f"dataset.sample_size={QUESTIONS}", "retrieval=bm25", f"cache.dir={cache_dir}",
        "llm=openai_compatible", "llm.model=openai/gen-model", f"llm.api_base={url}", *(f"llm.{r}" for r in retry),
        "judge=[lexical,llm]", "judge.model=openai/judge-model", f"judge.api_base={url}",
        "judge.metrics=[accuracy,faithfulness]", *(f"judge.{r}" for r in retry),
        "query=multi_query", "query.transform.client.model=openai/query-model",
        f"query.transform.client.api_base={url}", *(f"query.transform.client.{r}" for r in retry),
    ]


def _job(overrides: list[str], tmp_path: Path, budget: Budget, plan: bool = False) -> tuple[Any, dict[str, float],
                                                                                             Any]:
    """One job in-process as ``ragbench.app`` runs it (preflight, pipeline) with ``budget``: (result,
    its accounting, the plan predicted before it when asked)."""
    from ragbench.build import build
    from ragbench.outcome import preflight
    from ragbench.pipeline import Pipeline
    from ragbench.plan.predict import predict
    from tests.fixtures.jobs import compose_cfg

    components, cache = build(compose_cfg(overrides, tmp_path))
    predicted = predict("job", components, cache, {}, {}) if plan else None
    LEDGER.start_job(budget)
    before = LEDGER.snapshot()
    preflight(components)
    result = Pipeline(components, cache=cache).run()
    return result, accounting_metrics(before, LEDGER.snapshot()), predicted


def _per_model(server: LLMServer) -> Counter[str]:
    return Counter(str(r.get("model")) for r in server.requests)


@pytest.mark.parametrize("concurrency", [1, 8])
def test_budget_stop_and_rerun_send_exactly_the_uninterrupted_total_and_every_role_is_billed(
        llm_server, ledger, tmp_path, concurrency):
    first_attempt_refused(llm_server)
    whole, m, plan = _job(_overrides(llm_server, tmp_path / "whole", concurrency), tmp_path, Budget(scope="job"),
                          plan=True)
    total = llm_server.count
    # 3 preflights, per question a rewrite, an answer and 2 judge metrics: each request twice (429, 200)
    assert total == 2 * (3 + 4 * QUESTIONS) and not any(c.skipped or c.failed for c in whole.cases)
    sent = _per_model(llm_server)
    for role, model in ROLE_MODELS.items():
        assert m[f"llm/{role}_calls"] == sent[model], role
    assert m["llm/calls_total"] == total and m["tokens/total"] == llm_server.tokens
    assert m["tokens/query_total"] > 0 and m["llm/query_calls"] == 2 * (1 + QUESTIONS)
    assert plan.roles["query"].calls == QUESTIONS and plan.roles["query"].cached == 0  # plan=true predicts them

    llm_server.reset()
    first_attempt_refused(llm_server)  # the budgeted run meets the same faults as the uninterrupted one
    cache_dir = tmp_path / "budgeted"
    # past the preflights and rewrites, 2 cases (6 requests each), then the 3rd case's answer and its first
    # judge metric (kept, though its verdict is not), and a 429 for its second metric whose retry is refused
    n = 2 * (3 + QUESTIONS) + 6 * 2 + 5
    stopped, m1, _ = _job(_overrides(llm_server, cache_dir, concurrency), tmp_path, Budget(max_calls=n, scope="job"))
    assert llm_server.count == n and m1["llm/calls_total"] == n
    assert any(c.skipped for c in stopped.cases)
    requests = llm_server.requests[:]
    llm_server.requests.clear()  # the rule keeps its counts: a refused first attempt is not refused again
    again, m2, replan = _job(_overrides(llm_server, cache_dir, concurrency), tmp_path,
                             Budget(max_calls=10 * total, scope="job"), plan=True)
    assert not any(c.skipped or c.failed for c in again.cases)
    assert llm_server.count == total - n  # nothing paid for is asked again
    assert m2["llm/calls_total"] == total - n
    assert replan.roles["query"].calls == 0 and replan.roles["query"].cached == QUESTIONS
    assert Counter(str(r.get("model")) for r in requests) + _per_model(llm_server) == sent
