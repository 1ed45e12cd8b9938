"""LLMClient under reply faults: empty choices and garbage retried, huge replies refused, an echoed key
masked, the endpoint breaker, the preflight request. Against the loopback server."""

from __future__ import annotations

import socket

import pytest

from ragbench.cache.store import StageCache
from ragbench.errors import ConfigError
from ragbench.llm.client import LLMClient
from ragbench.llm.errors import (
    LLMAuthError,
    LLMCircuitOpenError,
    LLMConnectionError,
    LLMReplyTooLargeError,
    LLMResponseError,
    LLMServerError,
)
from tests.fixtures.llm_server import Step

KEY = "sk-unit-fault-key-4242"
MSGS = [{"role": "user", "content": "what?"}]


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("RAGBENCH_FAULT_KEY", KEY)


def _client(api_base, cache_dir, **kw):
    args = {"model": "openai/m", "api_base": api_base, "api_key_env": "RAGBENCH_FAULT_KEY", "num_retries": 2,
            "backoff_s": 0.0, "timeout": 5.0, "cache": StageCache(dir=str(cache_dir))}
    return LLMClient(**{**args, **kw})


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there once the socket is closed


@pytest.mark.parametrize("fault", [Step(no_choices=True), Step(garbage=True)], ids=["empty-choices", "garbage"])
def test_unusable_replies_are_retried_then_recover(llm_server, cache_dir, fault):
    llm_server.script(fault, Step(text="fine"))
    reply = _client(llm_server.url, cache_dir).complete(MSGS)
    assert (reply.text, reply.attempts, llm_server.count) == ("fine", 2, 2)


@pytest.mark.parametrize(
    "fault,error", [(Step(no_choices=True), LLMResponseError), (Step(garbage=True), LLMServerError)],
    ids=["empty-choices", "garbage"],
)
def test_unusable_replies_exhaust_retries_and_name_the_class(llm_server, cache_dir, fault, error):
    llm_server.script(fault, fault, fault)
    with pytest.raises(error, match=r"after 3 attempt\(s\).*; fix: ") as info:
        _client(llm_server.url, cache_dir).complete(MSGS)
    assert llm_server.count == 3 and "\n" not in str(info.value)
    assert not cache_dir.exists()  # nothing stored


def test_a_huge_reply_is_refused_once_never_stored(llm_server, cache_dir):
    llm_server.script(Step(size=5_000_000))
    client = _client(llm_server.url, cache_dir, max_reply_chars=100_000)
    with pytest.raises(LLMReplyTooLargeError, match=r"5,000,000 characters.*llm.max_reply_chars=100,000"):
        client.complete(MSGS)
    assert llm_server.count == 1 and not cache_dir.exists()  # not retried (the same prompt gives the same)
    llm_server.script(Step(size=100_000))
    assert len(client.complete(MSGS).text) == 100_000  # the bound itself is allowed


def test_an_echoed_key_is_masked_before_the_cache_and_the_caller(llm_server, cache_dir):
    llm_server.script(Step(text="the answer", echo_key=True))
    client = _client(llm_server.url, cache_dir)
    assert client.complete(MSGS).text == "the answer ***"
    assert client.complete(MSGS).usage.cached
    stored = [p.read_text() for p in cache_dir.rglob("*.json")]
    assert len(stored) == 1 and KEY not in stored[0] and "the answer ***" in stored[0]


def test_the_breaker_opens_after_consecutive_auth_failures(llm_server, cache_dir):
    llm_server.script(Step(status=401), Step(status=401), Step(status=500), Step(status=500), Step(status=500),
                      Step(status=401), Step(text="ok"), *[Step(status=401)] * 3)
    client = _client(llm_server.url, cache_dir, max_consecutive_failures=3)
    with pytest.raises(LLMAuthError):
        client.complete([{"role": "user", "content": "1"}])
    with pytest.raises(LLMAuthError):
        client.complete([{"role": "user", "content": "2"}])
    with pytest.raises(LLMServerError):  # a 500 is not an endpoint failure: not counted, no reset
        client.complete([{"role": "user", "content": "3"}])
    with pytest.raises(LLMCircuitOpenError) as info:  # the third 401 in a row
        client.complete([{"role": "user", "content": "4"}])
    message = str(info.value)
    assert "\n" not in message and "'openai/m'" in message and llm_server.url in message
    assert "3 calls in a row failed (AuthenticationError" in message and "fix: export a valid key" in message
    assert KEY not in message
    sent = llm_server.count
    with pytest.raises(LLMCircuitOpenError):  # open for good: nothing is sent any more
        client.complete([{"role": "user", "content": "5"}])
    assert llm_server.count == sent == 6


def test_a_success_resets_the_breaker(llm_server, cache_dir):
    llm_server.script(Step(status=401), Step(text="ok"), Step(status=401), Step(text="ok"))
    client = _client(llm_server.url, cache_dir, max_consecutive_failures=2)
    for i in range(4):
        try:
            client.complete([{"role": "user", "content": str(i)}])
        except LLMAuthError:
            pass
    assert client.breaker.message is None and llm_server.count == 4


def test_preflight_to_a_closed_port_fails_in_one_line(cache_dir):
    client = _client(_closed_port_url(), cache_dir, num_retries=1)
    with pytest.raises(LLMConnectionError, match=r"^preflight request before the case loop failed: llm model "
                                                  r"'openai/m' at http://127\.0\.0\.1:\d+/v1: .*; fix: check "
                                                  r"llm\.api_base") as info:
        client.preflight()
    assert "\n" not in str(info.value)


def test_preflight_is_cached_like_any_request(llm_server, cache_dir):
    _client(llm_server.url, cache_dir).preflight()
    _client(llm_server.url, cache_dir).preflight()
    _client(llm_server.url, cache_dir, role="embedder").preflight(kind="embedding")
    assert llm_server.count == 2


@pytest.mark.parametrize("kw", [{"max_reply_chars": 0}, {"max_consecutive_failures": -1},
                                {"max_reply_chars": 1.5}, {"max_consecutive_failures": True}])
def test_bad_fault_settings_are_config_errors(llm_server, cache_dir, kw):
    with pytest.raises(ConfigError, match=f"judge.{next(iter(kw))} must be an integer"):
        _client(llm_server.url, cache_dir, role="judge", **kw)
