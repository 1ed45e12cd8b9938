"""The session: what one ``ragbench`` process owns for the runs it does, in one typed object.

An entry point (``ragbench.__main__``, each ``ragbench.<package>.__main__``) makes it with ``begin()``
before any work; the rest reach it through ``current()``. It owns:

- ``ledger``: the LLM ledger and budget (``ragbench.budget.Ledger``): one per session, so a sweep run by
  the basic launcher shares one budget across its jobs;
- ``signals``: whether SIGINT/SIGTERM came (``ragbench.interrupts`` installs the handler that sets it);
- ``parents``: the sweep parent runs this process opened and has not closed (``ragbench.sweep``), closed
  FAILED by an exit handler registered when the first one opens, KILLED by ``__main__`` on an interrupt;
- ``caches``: what a job loads and the next job of the same process reuses (a loaded model, a system's
  counters, an MLflow experiment's id), one slot per owner.

A process with no entry point (a launcher's worker process running jobs, a test, a library caller) gets
a session made on first use: each such process has its own ledger; a worker's jobs share their sweep's
budget through the sweep's file (``ragbench.budget_file``), which the ledger reserves in.
``docs/layout.md`` lists the process-wide state that is not here, and why
(``tests/unit/test_process_state.py`` checks the list).
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ragbench.budget import Ledger

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class Signals:
    """The first SIGINT/SIGTERM's number, once one came (``ragbench.interrupts`` sets and reads it)."""

    requested: int | None = None


class Parents:
    """The sweep parent runs this process opened: sweep folder -> run id (for the jobs run in this
    process), and each run id -> its tracker until the run is closed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_dir: dict[str, str] = {}
        self._open: dict[str, Any] = {}
        self._at_exit = False

    def opened(self, sweep_dir: str, run_id: str, tracker: Any) -> None:
        """A sweep's parent run is open; an exit of the process that does not close it ends it FAILED."""
        with self._lock:
            self._by_dir[sweep_dir] = run_id
            self._open[run_id] = tracker
            if not self._at_exit:  # once, at the first parent: a handler only where one can be left open
                atexit.register(self.close_all, "FAILED")
                self._at_exit = True

    def run_id(self, sweep_dir: str) -> str | None:
        """The parent run of the sweep in ``sweep_dir`` (a resolved path), if this process opened it."""
        return self._by_dir.get(sweep_dir)

    def owns(self, run_id: str) -> bool:
        """Whether ``run_id`` is a sweep parent this process opened."""
        return run_id in self._by_dir.values()

    def closing(self, run_id: str) -> None:
        """``run_id`` is being closed by its sweep: no exit path closes it again."""
        with self._lock:
            self._open.pop(run_id, None)

    def close_all(self, status: str) -> None:
        """Ends every parent still open as ``status`` (an interrupt, an error, an exit). A store that fails
        is logged (the next sweep closes the run as stale); a full disk (``DiskFull``, not an Exception)
        propagates, once per parent that the store refuses to close."""
        while True:
            with self._lock:
                if not self._open:
                    return
                run_id, tracker = next(iter(self._open.items()))
                self._open.pop(run_id)
            try:
                tracker.end_run(run_id, status)
            except Exception as exc:  # noqa: BLE001 - the store may be what failed
                log.warning("could not close sweep run %s as %s: %s", run_id, status, exc)


class Caches:
    """What a job loads and a later job of the same session reuses: one slot per owner (a module's name),
    made by the owner's factory on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[str, Any] = {}

    def slot(self, name: str, factory: Callable[[], T]) -> T:
        """The slot ``name``, made by ``factory`` the first time (thread-safe)."""
        with self._lock:
            if name not in self._slots:
                self._slots[name] = factory()
            return self._slots[name]


@dataclass
class Session:
    """One process's run state (see the module docstring)."""

    ledger: Ledger = field(default_factory=Ledger)
    signals: Signals = field(default_factory=Signals)
    parents: Parents = field(default_factory=Parents)
    caches: Caches = field(default_factory=Caches)


_lock = threading.RLock()  # reentrant: a signal handler may ask for the session while current() holds it
_current: Session | None = None


def begin() -> Session:
    """A new session, current from now on: an entry point calls this before any work."""
    global _current
    with _lock:
        _current = Session()
        return _current


def current() -> Session:
    """The session the entry point began, or one made now (a worker process, a test, a library caller)."""
    global _current
    made = _current  # the common case, without the lock: safe points and the ledger ask at every step
    if made is not None:
        return made
    with _lock:
        if _current is None:
            _current = Session()
        return _current


class _CurrentLedger:
    """``LEDGER.reserve(...)``: the current session's ledger, looked up at each use (holds nothing)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        return getattr(current().ledger, name)


LEDGER: Any = _CurrentLedger()  # the current session's ledger, for the call sites that book LLM work


@dataclass(frozen=True)
class CacheSlot(Generic[T]):
    """A module's name for its slot in the current session's caches (``CacheSlot("reuse", LastValues)``):
    each use looks the slot up (``LAST.get(...)`` is ``current().caches.slot(...).get(...)``); holds
    nothing."""

    name: str
    factory: Callable[[], T]

    def here(self) -> T:
        """The current session's value of this slot."""
        return current().caches.slot(self.name, self.factory)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.here(), attr)


__all__ = ["LEDGER", "CacheSlot", "Caches", "Parents", "Session", "Signals", "begin", "current"]
