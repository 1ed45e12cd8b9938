"""RetryPolicy: backoff arithmetic, Retry-After, and which failures are retried."""

from __future__ import annotations

import httpx
import pytest

from ragbench.errors import ConfigError
from ragbench.llm.retry import RetryPolicy, retry_after_s


class Flaky(Exception):
    """Fails ``n`` times, as a server would."""


def _exc_with_headers(headers: dict[str, str]) -> Exception:
    exc = Exception("429")
    exc.response = httpx.Response(429, headers=headers)  # type: ignore[attr-defined]
    return exc


def test_delay_doubles_and_is_capped_without_jitter():
    policy = RetryPolicy(num_retries=5, backoff_s=0.5, max_backoff_s=3.0, jitter=0.0)
    assert [policy.delay(i) for i in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_jitter_stays_within_its_band():
    policy = RetryPolicy(backoff_s=1.0, jitter=0.25)
    for _ in range(50):
        assert 0.75 <= policy.delay(0) <= 1.25


def test_retry_after_headers_win_over_backoff():
    assert retry_after_s(_exc_with_headers({"retry-after-ms": "250"})) == pytest.approx(0.25)
    assert retry_after_s(_exc_with_headers({"Retry-After": "2"})) == 2.0
    assert retry_after_s(_exc_with_headers({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) is None
    assert retry_after_s(Exception("no response")) is None
    policy = RetryPolicy(backoff_s=1.0, max_backoff_s=5.0, jitter=0.0)
    assert policy.delay(3, _exc_with_headers({"retry-after": "2"})) == 2.0
    assert policy.delay(0, _exc_with_headers({"retry-after": "60"})) == 5.0  # capped


def test_run_retries_until_success_and_counts_attempts():
    calls, sleeps = [], []

    def call():
        calls.append(1)
        if len(calls) < 3:
            raise Flaky("transient")
        return "ok"

    policy = RetryPolicy(num_retries=3, backoff_s=0.1, jitter=0.0)
    result, attempts = policy.run(
        call, retryable=lambda e: isinstance(e, Flaky), what="t", sleep=sleeps.append
    )
    assert (result, attempts) == ("ok", 3)
    assert sleeps == [0.1, 0.2]


def test_run_reraises_after_num_retries():
    sleeps = []

    def call():
        raise Flaky("always")

    with pytest.raises(Flaky):
        RetryPolicy(num_retries=2, backoff_s=0.0).run(
            call, retryable=lambda e: True, what="t", sleep=sleeps.append
        )
    assert len(sleeps) == 2  # 3 attempts, 2 waits


def test_run_does_not_retry_permanent_errors():
    calls = []

    def call():
        calls.append(1)
        raise ValueError("bad request")

    with pytest.raises(ValueError):
        RetryPolicy(num_retries=5).run(
            call, retryable=lambda e: isinstance(e, Flaky), what="t", sleep=lambda s: None
        )
    assert len(calls) == 1


def test_negative_settings_are_config_errors():
    with pytest.raises(ConfigError, match="num_retries"):
        RetryPolicy(num_retries=-1)
    with pytest.raises(ConfigError, match="backoff_s"):
        RetryPolicy(backoff_s=-1.0)
