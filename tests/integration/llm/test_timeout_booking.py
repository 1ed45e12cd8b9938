"""Issue 47.8: an attempt that timed out, which the server still processed, is booked as attempted work
against the loopback server: one call, its prompt tokens estimated (``tokens/<role>_estimated``, in the
prompt tokens and the totals) and counted in ``llm/<role>_timeouts``; the retry that answered is booked
with the server's own usage."""

from __future__ import annotations

from ragbench.budget import Budget, accounting_metrics
from ragbench.llm.client import LLMClient
from ragbench.session import LEDGER
from tests.fixtures.llm_server import Step

PROMPT = "Summarise the meeting notes of Tuesday in one short sentence, please, for the weekly report."


def test_a_timed_out_attempt_is_booked_with_its_estimated_prompt(llm_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "none")
    LEDGER.start_job(Budget(scope="job"))
    client = LLMClient(
        model="openai/m",
        api_base=llm_server.url,
        api_key_env="OPENAI_API_KEY",
        role="judge",
        timeout=0.5,
        num_retries=1,
        backoff_s=0.0,
        cache=None,
    )
    llm_server.script(
        Step(delay_s=1.5)
    )  # the first attempt outlives its timeout; the server still answers it
    before = LEDGER.snapshot()
    reply = client.complete([{"role": "user", "content": PROMPT}])
    m = accounting_metrics(before, LEDGER.snapshot())
    assert reply.attempts == 2 and m["llm/judge_calls"] == 2 == llm_server.count
    assert m["llm/judge_timeouts"] == 1 and m["tokens/judge_estimated"] > 0
    answered = reply.usage.prompt_tokens  # the server's count for the same prompt (its words)
    assert m["tokens/judge_prompt"] == answered + m["tokens/judge_estimated"]
    assert m["tokens/judge_estimated"] >= len(PROMPT.split())  # litellm's token count of the same prompt
    LEDGER.start_job(Budget(scope="job"))
