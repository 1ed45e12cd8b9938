"""SIGINT and SIGTERM as ``Interrupted`` (a KeyboardInterrupt), raised in the main thread — except inside
``deferred()``, a block that must not be cut in half (a write to the MLflow store): a signal arriving there
is held and raised when the block ends.

Why: an interrupt raised in the middle of a SQLAlchemy commit can leave a connection mid-transaction, and
then the writes that close the runs as KILLED wait on sqlite's lock. Only the standard library is imported:
``__main__`` installs the handlers before Hydra starts.
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

_depth = 0  # nesting of deferred() blocks in the main thread (signal handlers run only there)
_held: int | None = None  # a signal that arrived inside one


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM (what ``timeout``, CI runners and SLURM send): unwinds like Ctrl-C, so every
    open run ends KILLED on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _handler(signum: int, frame: FrameType | None) -> None:
    global _held
    if _depth:
        _held = signum  # raised when the deferred block ends
        return
    raise Interrupted(signum)


def install_handlers() -> None:
    """SIGINT and SIGTERM raise ``Interrupted`` in the main thread (elsewhere Python allows no handler)."""
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _handler)


def ignore() -> None:
    """No further signal cuts the closing short (after the first one reached the top)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


@contextmanager
def deferred() -> Iterator[None]:
    """Holds SIGINT/SIGTERM until the block ends, then raises them (main thread; a no-op elsewhere)."""
    global _depth, _held
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0 and _held is not None:
            signum, _held = _held, None
            raise Interrupted(signum)


class Deferred:
    """A proxy whose method calls run inside ``deferred()`` (the MLflow client: no write is cut in half)."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_target":  # pickle's probes before __init__ ran (launchers)
            raise AttributeError(name)
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            with deferred():
                return attr(*args, **kwargs)

        return call

    @property
    def wrapped(self) -> Any:
        return self._target


__all__ = ["Deferred", "Interrupted", "deferred", "ignore", "install_handlers"]
