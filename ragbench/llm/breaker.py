"""A circuit breaker over one client's calls: a few connection/auth failures in a row stop the job."""

from __future__ import annotations

import threading

from ragbench.errors import LLMError
from ragbench.llm.errors import ENDPOINT_FAILURES


class EndpointBreaker:
    """Counts endpoint failures (connection refused, 401/403) in a row; a success resets the count.

    At ``limit`` the breaker opens for good: ``message`` is then one line naming the model, the
    endpoint and the fix, and every later call fails at once with it (``limit=0`` never opens).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.message: str | None = None
        self._in_a_row = 0
        self._lock = threading.Lock()

    def success(self) -> None:
        with self._lock:
            self._in_a_row = 0

    def failure(self, cls: type[LLMError], *, where: str, detail: str, fix: str) -> str | None:
        """Records one failed call; returns the breaker's message when it is (now) open."""
        with self._lock:
            if self.message is None and self.limit and issubclass(cls, ENDPOINT_FAILURES):
                self._in_a_row += 1
                if self._in_a_row >= self.limit:
                    self.message = (
                        f"{where}: {self._in_a_row} calls in a row failed ({detail}); stopping the case loop "
                        f"(max_consecutive_failures={self.limit}); fix: {fix}"
                    )
            return self.message
