"""Retry with exponential backoff around one provider call, honouring the server's Retry-After.

litellm's own ``num_retries`` needs ``tenacity``, which litellm does not declare (BerriAI/litellm#5690,
#19462): without it every retried failure turns into a bare ``Exception("tenacity import failed")``
and the error class is lost. So litellm is called with ``num_retries=0, max_retries=0`` (one HTTP
attempt per call, on every provider) and the loop below does the retrying.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ragbench.errors import ConfigError

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """``num_retries`` retries after the first attempt; waits ``backoff_s * 2**i`` (jittered, capped)."""

    num_retries: int = 3
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        if self.num_retries < 0:
            raise ConfigError(f"llm.num_retries must be >= 0, got {self.num_retries}")
        if self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ConfigError(f"llm.backoff_s must be >= 0, got {self.backoff_s}")

    def delay(self, retry: int, exc: BaseException | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based); a server's Retry-After wins."""
        hinted = retry_after_s(exc) if exc is not None else None
        if hinted is not None:
            return min(hinted, self.max_backoff_s)
        base = min(self.backoff_s * (2.0**retry), self.max_backoff_s)
        return base * (1.0 + random.uniform(-self.jitter, self.jitter))

    def run(
        self,
        call: Callable[[], T],
        *,
        retryable: Callable[[BaseException], bool],
        what: str,
        sleep: Callable[[float], None] = time.sleep,
        describe: Callable[[BaseException], str] = lambda exc: type(exc).__name__,
    ) -> tuple[T, int]:
        """(result, attempts made). Retries while ``retryable(exc)``; re-raises the last exception.
        ``describe`` names a failure in the retry warning (the caller's own error class)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return call(), attempt
            except Exception as exc:
                if not retryable(exc) or attempt > self.num_retries:
                    raise
                wait = self.delay(attempt - 1, exc)
                log.warning(
                    "%s: %s (attempt %d of %d); retrying in %.2fs",
                    what,
                    describe(exc),
                    attempt,
                    self.num_retries + 1,
                    wait,
                )
                sleep(wait)


def _headers(exc: BaseException) -> Mapping[str, Any]:
    headers = getattr(exc, "litellm_response_headers", None)
    if headers:
        return headers
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None) or {}


def retry_after_s(exc: BaseException) -> float | None:
    """The wait a 429/503 asked for (``retry-after-ms`` or ``retry-after`` seconds), if any."""
    headers = _headers(exc)
    lowered = {str(k).lower(): v for k, v in dict(headers).items()}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = lowered.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) * scale
        except (TypeError, ValueError):
            continue  # an HTTP date: fall back to our own backoff
        if value >= 0:
            return value
    return None
