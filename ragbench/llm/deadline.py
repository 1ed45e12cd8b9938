"""A deadline for a whole attempt (connect, headers, body), not for each read.

A client library's ``timeout`` (httpx, urllib, the openai SDK) bounds each socket operation: a server that
trickles its reply one byte a second never lets one read wait that long, so one call can last for minutes
(httpx says so itself: encode/httpx#1450; a total timeout in sync code is left to the caller).
``within(seconds, fn)`` runs ``fn`` in a worker thread and waits for it at most ``seconds``: past that it
raises ``DeadlinePassed`` at once, and shuts down every socket the attempt registered with ``track`` (a
blocked read then returns and the worker ends, instead of reading the trickle to its end). A library whose
sockets cannot be reached is still bounded for the caller: its worker is left to end by itself.
"""

from __future__ import annotations

import contextvars
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class DeadlinePassed(TimeoutError):
    """The attempt outlived its deadline (callers raise their own failure class, naming their setting)."""


class Deadline:
    """One attempt's deadline and the sockets it opened (shut down when the deadline passes)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self.at = time.monotonic() + self.seconds
        self.passed = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def track(self, sock: Any) -> None:
        """Registers ``sock``: shut down when the deadline passes (at once if it already has)."""
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            if not self.passed:
                self._sockets.append(sock)
                return
        _shut(sock)

    def abort(self) -> None:
        """The deadline passed: every registered socket is shut down (a blocked read returns)."""
        with self._lock:
            self.passed = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by its owner


_CURRENT: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("ragbench_deadline", default=None)


def current() -> Deadline | None:
    """The deadline of the attempt running in this thread, if any."""
    return _CURRENT.get()


def track(sock: Any) -> None:
    """Registers ``sock`` with the running attempt's deadline (nothing outside one)."""
    deadline = _CURRENT.get()
    if deadline is not None:
        deadline.track(sock)


def within(seconds: float, fn: Callable[[], T], *, name: str = "ragbench-attempt") -> T:
    """``fn()``, or ``DeadlinePassed`` once ``seconds`` have passed (its sockets shut down). An exception
    of ``fn`` is raised as it is. ``fn`` runs in a daemon thread, in a copy of the caller's context."""
    deadline = Deadline(seconds)
    box: dict[str, Any] = {}  # "value" (a T) or "error"

    def run() -> None:
        _CURRENT.set(deadline)
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as it is
            box["error"] = exc

    worker = threading.Thread(target=contextvars.copy_context().run, args=(run,), name=name, daemon=True)
    worker.start()
    worker.join(deadline.remaining())
    if worker.is_alive():
        deadline.abort()
        raise DeadlinePassed(f"no complete reply within {seconds:g} s")
    if "error" in box:
        error: BaseException = box.pop("error")
        raise error
    value: T = box["value"]
    return value
