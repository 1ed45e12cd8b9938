"""``ragbench.llm.batch``: a batch through litellm against the stand-in batch API (tests/fixtures/batch_server):
the replies a normal call gets, a resumed batch is never sent again, half the list price, and a provider
without a batch API refused in one line."""

from __future__ import annotations

import pytest

from ragbench.cache.store import StageCache
from ragbench.errors import ConfigError
from ragbench.llm.batch import STAGE, BatchRunner, batch_cost, check_provider
from ragbench.llm.client import LLMClient
from tests.fixtures.batch_server import BatchServer
from tests.fixtures.llm_server import default_reply

MODEL = "openai/gpt-4o-mini"  # priced in litellm's offline map, batch prices included
PROMPTS = {f"q{i}": [{"role": "user", "content": f'<reference id="ref_1">Answer number {i} is here</reference>'}]
           for i in range(3)}


class Died(Exception):
    """Stands for the process ending (kill -9) while it waits for the batch."""


@pytest.fixture()
def server():
    with BatchServer(polls_before_done=2) as s:
        yield s


def runner(server: BatchServer, store: StageCache, **kw) -> BatchRunner:
    return BatchRunner(model=MODEL, api_base=server.url, api_key="none", store=store, poll_s=0.0, max_tokens=64,
                       **kw)


def test_a_batch_answers_as_normal_calls_do_and_a_rerun_resumes_it(server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "none")  # the normal calls: litellm's default variable
    store = StageCache(dir=str(tmp_path / "cache"))
    bodies = {cid: {"messages": m, "temperature": 0.0, "max_tokens": 64} for cid, m in PROMPTS.items()}

    def die(_seconds: float) -> None:
        raise Died

    with pytest.raises(Died):  # submitted, then the process "ends" while the batch is in progress
        runner(server, store, sleep=die).run(bodies)
    assert server.submitted == 1 and list((tmp_path / "cache" / STAGE).rglob("*.json"))
    again = runner(server, store)
    replies = again.run(bodies)
    assert again.resumed and server.submitted == 1  # polled the recorded batch, sent nothing new
    assert {cid: r.text for cid, r in replies.items()} == {cid: default_reply({"messages": m})
                                                           for cid, m in PROMPTS.items()}
    normal = LLMClient(model=MODEL, api_base=server.url, cache=None, max_tokens=64)
    for cid, messages in PROMPTS.items():
        reply = normal.complete(messages)
        assert reply.text == replies[cid].text
        assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (
            replies[cid].usage.prompt_tokens, replies[cid].usage.completion_tokens)
        assert reply.usage.cost_usd > 0
        assert replies[cid].usage.cost_usd == pytest.approx(reply.usage.cost_usd / 2)  # the batch price


def test_an_unpriced_batch_model_is_half_its_list_price_and_providers_without_batches_are_refused():
    from ragbench.llm.loader import litellm

    a, b = litellm().cost_per_token(model="mistral/codestral-latest", prompt_tokens=1000,
                                    completion_tokens=100)
    assert batch_cost("mistral/codestral-latest", 1000, 100) == pytest.approx((a + b) / 2)
    with pytest.raises(ConfigError) as info:
        check_provider("ollama/llama3", "judge")
    assert "\n" not in str(info.value) and "judge.batch=false" in str(info.value)
