"""A deadline for a whole attempt (connect, headers, body), not for each read.

A client library's ``timeout`` (httpx, urllib, the openai SDK) bounds each socket operation: a server that
trickles its reply one byte a second never lets one read wait that long, so one call can last for minutes
(httpx says so itself: encode/httpx#1450; a total timeout in sync code is left to the caller).
``within(seconds, fn)`` runs ``fn`` in a worker thread and waits for it at most ``seconds``: past that it
raises ``DeadlinePassed`` at once, and shuts down every socket the attempt registered with ``track`` (a
blocked read then returns and the worker ends, instead of reading the trickle to its end). A library whose
sockets cannot be reached is still bounded for the caller: its worker is left to end by itself, and it
keeps its place among the client's concurrent requests until it does (``holding``): an abandoned attempt
is still in flight (the server still works on it), so a retry or the next call waits for a free place
rather than pushing the requests in flight past ``max_concurrency``.
"""

from __future__ import annotations

import contextlib
import contextvars
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator
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


class Slot:
    """One call's place among a client's concurrent requests (a semaphore's unit). An attempt abandoned at
    its deadline takes the place with it (its worker gives it back when it really ends); the call then
    waits for another place before its next attempt."""

    def __init__(self, places: threading.Semaphore, total: int) -> None:
        self._places = places
        self.total = total
        self.held = False

    def take(self, patience: float) -> bool:
        """Waits for a place; False when every place has been held by an abandoned attempt still running
        for ``patience`` seconds (a server that never finishes its reply: waiting could last for ever)."""
        starved_since: float | None = None
        while not self.held:
            if self._places.acquire(timeout=0.1):
                self.held = True
            elif _abandoned(self._places) < self.total:
                starved_since = None  # a live call holds a place: it ends, as calls do
            elif starved_since is None:
                starved_since = time.monotonic()
            elif time.monotonic() - starved_since >= patience:
                return False
        return True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self._places.release()

    def hand_over(self) -> Callable[[], None]:
        """The place passes to an abandoned attempt: what its worker calls when it ends."""
        if not self.held:
            return lambda: None
        self.held = False
        places = self._places
        with _ABANDONED_LOCK:
            _ABANDONED[places] = _ABANDONED.get(places, 0) + 1

        def ended() -> None:
            with _ABANDONED_LOCK:
                _ABANDONED[places] -= 1
            places.release()
        return ended


# attempts abandoned at their deadline and still running, per client's places (they hold a place each)
_ABANDONED: weakref.WeakKeyDictionary[threading.Semaphore, int] = weakref.WeakKeyDictionary()
_ABANDONED_LOCK = threading.Lock()


def _abandoned(places: threading.Semaphore) -> int:
    with _ABANDONED_LOCK:
        return _ABANDONED.get(places, 0)


_SLOT: contextvars.ContextVar[Slot | None] = contextvars.ContextVar("ragbench_slot", default=None)


@contextlib.contextmanager
def holding(places: threading.Semaphore, total: int, patience: float) -> Iterator[Slot]:
    """A call's place among ``places`` (``total`` of them) for the block; ``within`` in the block hands it
    to an attempt it abandons and takes a new one before the next attempt. When every place stays held by
    abandoned attempts still running for ``patience`` seconds (a deadline's length), the block runs
    without one and its attempts fail (``DeadlinePassed``), instead of waiting for ever."""
    slot = Slot(places, total)
    slot.take(patience)
    token = _SLOT.set(slot)
    try:
        yield slot
    finally:
        _SLOT.reset(token)
        slot.give_back()


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
    slot = _SLOT.get()
    if slot is not None and not slot.take(seconds):  # after an abandoned attempt: wait for a free place
        raise DeadlinePassed(f"no place to send it: all {slot.total} are held by attempts abandoned at their "
                             "deadline and still running (the server has not finished them)")
    deadline = Deadline(seconds)
    box: dict[str, Any] = {}  # "value" (a T) or "error"
    ended = threading.Lock()  # guards "done" and "on_end" between the worker and the caller
    state: dict[str, Any] = {"done": False, "on_end": None}

    def run() -> None:
        _CURRENT.set(deadline)
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as it is
            box["error"] = exc
        finally:
            with ended:
                state["done"] = True
                on_end = state["on_end"]
            if on_end is not None:
                on_end()  # an abandoned attempt gives its place back only now

    worker = threading.Thread(target=contextvars.copy_context().run, args=(run,), name=name, daemon=True)
    worker.start()
    worker.join(deadline.remaining())
    if worker.is_alive():
        deadline.abort()
        if slot is not None:
            give_back = slot.hand_over()
            with ended:
                finished = state["done"]
                if not finished:
                    state["on_end"] = give_back
            if finished:
                give_back()
        raise DeadlinePassed(f"no complete reply within {seconds:g} s")
    if "error" in box:
        error: BaseException = box.pop("error")
        raise error
    value: T = box["value"]
    return value
