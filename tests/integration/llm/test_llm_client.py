"""LLMClient against the loopback server: replies, usage, cache, concurrency bound, key handling."""

from __future__ import annotations

import threading

import pytest

from ragbench.cache.store import StageCache
from ragbench.errors import ConfigError
from ragbench.llm.client import LLMClient
from ragbench.llm.errors import LLMRequestError
from tests.fixtures.llm_server import Step, default_reply

MSGS = [{"role": "system", "content": "s"}, {"role": "user", "content": "what?"}]


def _client(server, cache_dir, **kw):
    defaults = {
        "model": "openai/test-model",
        "api_base": server.url,
        "api_key_env": "RAGBENCH_TEST_KEY",
        "num_retries": 2,
        "backoff_s": 0.01,
        "timeout": 5.0,
        "cache": StageCache(dir=str(cache_dir)),
    }
    return LLMClient(**{**defaults, **kw})


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("RAGBENCH_TEST_KEY", "sk-unit-test-key-000")


def test_reply_usage_and_request_shape(llm_server, cache_dir):
    llm_server.script(Step(text="forty two"))
    reply = _client(llm_server, cache_dir, temperature=0.0, max_tokens=7).complete(MSGS)
    assert reply.text == "forty two" and reply.attempts == 1
    # the fixture counts words: prompt "s" + "what?" = 2, completion 2
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.cached) == (2, 2, False)
    body = llm_server.requests[0]
    assert body["model"] == "test-model" and body["messages"] == MSGS
    assert body["temperature"] == 0.0 and body["max_tokens"] == 7
    assert llm_server.auth_headers[0] == "Bearer sk-unit-test-key-000"


def test_second_identical_call_is_served_from_cache(llm_server, cache_dir, caplog):
    client = _client(llm_server, cache_dir)
    first = client.complete(MSGS)
    with caplog.at_level("INFO", logger="ragbench.llm.cache"):
        second = client.complete(MSGS)
    assert llm_server.count == 1
    assert second.text == first.text and second.usage.cached and second.attempts == 0
    assert (second.usage.prompt_tokens, second.usage.completion_tokens) == (
        first.usage.prompt_tokens,
        first.usage.completion_tokens,
    )
    assert "served from cache" in caplog.text
    # a new client on the same directory (a rerun) also makes no request
    _client(llm_server, cache_dir).complete(MSGS)
    assert llm_server.count == 1


def test_key_extra_and_params_are_part_of_the_key(llm_server, cache_dir):
    client = _client(llm_server, cache_dir)
    client.complete(MSGS)
    client.complete(MSGS, key_extra={"repeat": 1})
    _client(llm_server, cache_dir, temperature=0.7).complete(MSGS)
    _client(llm_server, cache_dir, model="openai/other").complete(MSGS)
    assert llm_server.count == 4


def test_no_store_always_calls(llm_server, cache_dir):
    client = _client(llm_server, cache_dir, cache=None)
    client.complete(MSGS)
    client.complete(MSGS)
    assert llm_server.count == 2 and not cache_dir.exists()


def test_permanent_error_is_not_retried(llm_server, cache_dir):
    llm_server.script(Step(status=400))
    with pytest.raises(LLMRequestError, match="BadRequestError after 1 attempt"):
        _client(llm_server, cache_dir).complete(MSGS)
    assert llm_server.count == 1


def test_max_concurrency_bounds_requests_in_flight(llm_server, cache_dir):
    llm_server.delay_s = 0.1
    client = _client(llm_server, cache_dir, max_concurrency=3, cache=None)
    threads = [
        threading.Thread(target=client.complete, args=([{"role": "user", "content": str(i)}],))
        for i in range(9)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert llm_server.count == 9
    assert llm_server.max_in_flight <= 3  # the bound; whether all 3 slots filled at once is timing


def test_requests_run_concurrently(llm_server, cache_dir):
    """Concurrency proved without timing: the server holds every reply until 3 requests are in flight
    at once, which a client that sent one request at a time would never reach (it would time out)."""
    arrived = threading.Barrier(3, timeout=20)

    def reply_when_three_in_flight(body):
        arrived.wait()  # raises BrokenBarrierError (a 500) if the three never overlap
        return default_reply(body)

    llm_server.responder = reply_when_three_in_flight
    client = _client(llm_server, cache_dir, max_concurrency=3, cache=None, num_retries=0)
    errors: list[BaseException] = []

    def call(i: int) -> None:
        try:
            client.complete([{"role": "user", "content": str(i)}])
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and llm_server.count == 3 and llm_server.max_in_flight == 3


def test_embeddings_in_order_and_cached(llm_server, cache_dir):
    client = _client(llm_server, cache_dir, model="openai/emb")
    out = client.embed(["alpha beta", "gamma", "alpha beta"])
    assert len(out.vectors) == 3 and out.vectors[0] == out.vectors[2] != out.vectors[1]
    assert len(out.vectors[0]) == llm_server.dim
    again = client.embed(["alpha beta", "gamma", "alpha beta"])
    assert again.vectors == out.vectors and again.usage.cached and llm_server.count == 1


def test_missing_key_variable_is_a_config_error_naming_it(monkeypatch, llm_server, cache_dir):
    monkeypatch.delenv("RAGBENCH_TEST_KEY")
    with pytest.raises(ConfigError, match="RAGBENCH_TEST_KEY") as info:
        _client(llm_server, cache_dir, role="judge")
    assert "judge.api_key_env" in str(info.value)


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"timeout": 0}, "timeout"),
        ({"model": ""}, "model"),
        ({"num_retries": -1}, "num_retries"),
    ],
)
def test_bad_settings_are_config_errors(llm_server, cache_dir, kw, match):
    with pytest.raises(ConfigError, match=match):
        _client(llm_server, cache_dir, **kw)


def test_repr_names_no_key(llm_server, cache_dir):
    client = _client(llm_server, cache_dir)
    assert "sk-unit-test-key-000" not in repr(client) and "sk-unit-test-key-000" not in str(vars(client))


def test_cache_if_keeps_rejected_replies_out_of_the_cache(llm_server, cache_dir):
    client = _client(llm_server, cache_dir)
    llm_server.script(Step(text="garbled"), Step(text="good"))
    assert client.complete(MSGS, cache_if=lambda t: t == "good").text == "garbled"
    assert client.complete(MSGS, cache_if=lambda t: t == "good").text == "good"
    assert client.complete(MSGS, cache_if=lambda t: t == "good").usage.cached
    assert llm_server.count == 2
