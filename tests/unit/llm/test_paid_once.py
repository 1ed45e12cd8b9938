"""A reply is paid for once (issues 45.1, 47.8): answers and verdicts are kept in the reply cache with or
without a budget (only ``cache.mode=refresh`` asks again), an unparseable verdict is kept too and counted
as failed each time it is read, and an attempt that timed out is booked as attempted work. The client's
provider call is a stand-in here (no litellm)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragbench.budget import Budget, accounting_metrics
from ragbench.cache.store import StageCache
from ragbench.generate.llm import LLMGenerator
from ragbench.judge.asking import Tally, ask, int_in
from ragbench.judge.llm import LLMJudge
from ragbench.llm.cache import ReplyCache
from ragbench.llm.client import LLMClient
from ragbench.llm.deadline import DeadlinePassed
from ragbench.llm.errors import LLMServerError, LLMTimeoutError
from ragbench.metric_keys import metric_info
from ragbench.session import LEDGER
from ragbench.types import Answer, Context, Level, Query, Usage

QUERY = Query(qid="q1", text="Where did Mel go?", answers=("the lake",), question_type="single_hop")
CTX = (
    Context(chunk_id="c1", text="Mel went to the lake.", title="S1", level=Level.PARAGRAPH, hit_ids=("c1",)),
)


@pytest.fixture(autouse=True)
def _no_budget() -> Iterator[None]:
    LEDGER.start_job(Budget(scope="job"))  # no limit: the case the old client did not cache answers in
    yield
    LEDGER.start_job(Budget(scope="job"))


class Provider:
    """Stands in for ``LLMClient._call``: counts requests sent and answers each with ``reply``."""

    def __init__(self, reply: str) -> None:
        self.reply, self.sent = reply, 0

    def __call__(
        self, send: Any, bound: Any, read: Any, *, call_type: str = "completion"
    ) -> tuple[str, Usage, int]:
        self.sent += 1
        return self.reply, Usage(prompt_tokens=10, completion_tokens=2), 1


def _wire(
    client: LLMClient, root: Path, reply: str, monkeypatch: pytest.MonkeyPatch, mode: str = "read_write"
) -> Provider:
    provider = Provider(reply)
    monkeypatch.setattr(client, "_call", provider)
    monkeypatch.setattr("ragbench.llm.client._import_seconds", lambda: 0.0)
    client.cache = ReplyCache(StageCache(dir=str(root), mode=mode), "test")
    return provider


def test_an_answer_is_sent_once_without_a_budget(tmp_path, monkeypatch):
    assert not LEDGER.budget.limited
    gen = LLMGenerator(model="openai/gen", api_base="http://127.0.0.1:9/v1")
    provider = _wire(gen.client, tmp_path, "the lake [ref_1]", monkeypatch)
    first = gen.answer(QUERY, CTX)
    again = LLMGenerator(model="openai/gen", api_base="http://127.0.0.1:9/v1")  # the next job of the sweep
    again.client._call = provider  # type: ignore[method-assign]
    again.client.cache = gen.client.cache
    second = again.answer(QUERY, CTX)
    assert provider.sent == 1 and second.text == first.text and second.usage.cached


def test_a_verdict_repeated_by_another_job_is_not_sent_again(tmp_path, monkeypatch):
    judge = LLMJudge(model="openai/judge", metrics=["accuracy", "correctness"])
    provider = _wire(judge.client, tmp_path, '{"score": 3, "reasoning": "close"}', monkeypatch)
    answer = Answer(text="the lake", model="openai/gen")
    scores = judge.judge(QUERY, CTX, answer)
    assert provider.sent == 2 and scores["judge/accuracy"] == 0.75
    # a top-k sweep's next job: other contexts, the same answer; the rubrics that do not show the contexts
    # ask byte for byte the same request (default.yaml's accuracy and correctness show no references)
    again = judge.judge(QUERY, CTX, answer)
    assert provider.sent == 2 and again["judge/accuracy"] == 0.75 and again["judge/correctness"] == 0.75


def test_cache_mode_refresh_asks_again(tmp_path, monkeypatch):
    gen = LLMGenerator(model="openai/gen")
    provider = _wire(gen.client, tmp_path, "the lake", monkeypatch)
    gen.answer(QUERY, CTX)
    gen.client.cache = ReplyCache(StageCache(dir=str(tmp_path), mode="refresh"), "test")
    gen.answer(QUERY, CTX)
    assert provider.sent == 2


def test_an_unparseable_verdict_is_cached_and_counted_failed_each_time_it_is_read(tmp_path, monkeypatch):
    judge = LLMJudge(model="openai/judge", metrics=["accuracy"])
    provider = _wire(judge.client, tmp_path, "The answer restates the question.", monkeypatch)
    answer = Answer(text="the lake", model="openai/gen")
    first = judge.judge(QUERY, CTX, answer)
    second = judge.judge(QUERY, CTX, answer)
    assert provider.sent == 1  # the rerun re-paid it before
    for scores in (first, second):
        assert scores["judge/judge_failed"] == 1.0 and "judge/accuracy" not in scores  # never scored


def test_a_malformed_ask_is_cached_per_attempt_and_failed_again_on_rerun(tmp_path, monkeypatch):
    client = LLMClient(model="openai/judge", role="judge", cache=None)
    provider = _wire(client, tmp_path, "no json here", monkeypatch)
    msgs = [{"role": "user", "content": "label it"}]
    for _ in range(2):
        tally = Tally(prefix="judge/rf")
        assert ask(client, msgs, int_in((0, 1)), tally, what="label", parse_retries=1) is None
        assert tally.failed == 1
    assert provider.sent == 2  # two attempts, paid once


# ------------------------------------------------------------------ 47.8: timed-out attempts are work
def test_a_timed_out_attempt_is_booked_with_its_estimated_prompt(monkeypatch):
    client = LLMClient(model="openai/m", role="judge", cache=None)
    before = LEDGER.snapshot()

    def timed_out(lib: Any, extra: dict[str, Any]) -> Any:
        raise LLMTimeoutError("read timed out")

    def deadline(lib: Any, extra: dict[str, Any]) -> Any:  # the whole attempt's deadline (ragbench.llm.deadline)
        raise DeadlinePassed("no complete reply within 5 s")

    def refused(lib: Any, extra: dict[str, Any]) -> Any:
        raise LLMServerError("503")

    for fn in (timed_out, deadline, refused):
        with pytest.raises((LLMTimeoutError, DeadlinePassed, LLMServerError)):
            client._booking_timeouts(fn, lambda: Usage(prompt_tokens=1720, cost_usd=0.5))(None, {})
    m = accounting_metrics(before, LEDGER.snapshot())
    assert m["llm/judge_timeouts"] == 2 and m["tokens/judge_estimated"] == 3440  # the 503 is not work
    assert m["tokens/judge_prompt"] == 3440 and m["tokens/total"] == 3440 and m["cost/judge_usd"] == 1.0
    assert m["llm/judge_calls"] == 0  # each attempt's call is booked once, by _call's settle
    assert metric_info("llm/judge_timeouts").kind == "diagnostic"
    assert metric_info("tokens/generation_estimated").kind == "diagnostic"
