"""The budget a sweep's worker processes share: one JSON file in the sweep folder, changed under a lock.

A sweep whose jobs run in other processes (the joblib, Ray and submitit launchers) has one ceiling for
all of them (``budget.scope=sweep``): every worker's ledger (``ragbench.budget.Ledger``) reserves each
request in this file before sending it and settles it here when it returns, so requests in flight in
every process count, and ``budget.max_calls=N`` sends N requests in all. The file is
``<hydra.sweep.dir>/ragbench_budget.json``, opened for each change and locked with ``fcntl.flock``; a
change rewrites it in one ``pwrite`` (padded with spaces to the old length, never truncated), so a process
killed mid-change leaves the old state or the new (a kill does not cut a write short), and the kernel
drops a dead process's lock. (A temporary file renamed over it took 10-25 ms per change on a busy ext4
disk; the write takes microseconds.)

The sweep folder, not the cache folder or the tracking server: its scope is the sweep (one file per sweep,
nothing to key or prune; two sweeps sharing a cache do not share a budget), and every job already reads
it to find its parent run, so every node already sees it at the same path. A tracking server is not
always there and offers no atomic counter.

What the file holds (``Tally``): the requests settled and their cost, the reservations in flight per
process (``host:pid:start``, ``ragbench.tracking.owner``), when the first limited job began (the clock of
``max_minutes``), the budget message once a limit was reached, and the sweep's parent run id: a file left
by an earlier sweep in the same folder (a rerun with a fixed ``hydra.sweep.dir``) starts afresh.

A worker killed mid-request (kill -9, OOM) leaves its reservations in the file. The next change by a
process on the same host finds the owner gone and books them as spent, at their reserved maximum (the
request may have reached the provider and been billed): ``lost`` counts them. A reservation of a process on
another host cannot be checked; it stays held, counted as spent, until the sweep ends.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ragbench.errors import RagbenchError

FILE = "ragbench_budget.json"
FORMAT = "ragbench-budget/1"
LOCK_TIMEOUT_S = 60.0  # a change holds the lock for a read and a write: a minute is a broken lock
LOCK_POLL_S = 0.001
T = TypeVar("T")


class LedgerFileError(RagbenchError):
    """The sweep's shared budget file cannot be locked, read or written."""


@dataclass
class Tally:
    """The sweep's budget state (see the module docstring)."""

    sweep: str
    calls: float = 0.0  # requests settled (a reply or not), and those booked without a reservation
    usd: float = 0.0  # their cost, and timed-out attempts' estimated cost
    holds: dict[str, list[float]] = field(default_factory=dict)  # owner -> [requests in flight, usd held]
    started: float | None = None  # time.time() when the sweep's first limited job began
    stopped: str | None = None  # the budget message once a limit was reached
    lost: float = 0.0  # reservations of processes that died in flight, booked as spent
    version: int = 0  # counts the changes: a waiting process sees whether anything moved

    def dump(self) -> bytes:
        """The file's text (``dataclasses.asdict`` deep-copies: ten times slower)."""
        return json.dumps({"format": FORMAT, "sweep": self.sweep, "calls": self.calls, "usd": self.usd,
                           "holds": self.holds, "started": self.started, "stopped": self.stopped,
                           "lost": self.lost, "version": self.version}).encode()

    @property
    def held_calls(self) -> float:
        return sum(h[0] for h in self.holds.values())

    @property
    def held_usd(self) -> float:
        return sum(h[1] for h in self.holds.values())

    def hold(self, owner: str, usd: float) -> None:
        """Reserves one request of maximum cost ``usd`` for ``owner``."""
        held = self.holds.setdefault(owner, [0.0, 0.0])
        held[0] += 1
        held[1] += usd

    def settle(self, owner: str, held: float, usd: float) -> None:
        """Books ``owner``'s reserved request (of maximum cost ``held``) as sent, at its real cost ``usd``."""
        self.book(1, usd)
        mine = self.holds.get(owner)
        if mine is not None:
            mine[0] -= 1
            mine[1] = max(0.0, mine[1] - held)
            if mine[0] <= 0:
                del self.holds[owner]

    def book(self, calls: float, usd: float) -> None:
        """Books requests sent (``calls``) and cost (``usd``) without a reservation."""
        self.calls += calls
        self.usd += usd

    def reap(self, gone: Callable[[str], bool | None], me: str) -> None:
        """Books the reservations of owners verifiably gone as spent at their reserved maximum."""
        for owner in [o for o in self.holds if o != me and gone(o) is True]:
            calls, usd = self.holds.pop(owner)
            self.book(calls, usd)
            self.lost += calls


class LedgerFile:
    """The sweep's shared tally at ``path``, changed by ``update`` under the file's lock on behalf of
    ``owner`` (this process); ``gone(owner)`` is True when that process is verifiably dead."""

    def __init__(self, path: Path, *, sweep: str, owner: str, gone: Callable[[str], bool | None]) -> None:
        self.path, self.sweep, self.owner, self._gone = Path(path), sweep, owner, gone
        self._threads = threading.Lock()  # flock does not exclude threads of one process sharing a file

    def _error(self, what: str, exc: OSError) -> LedgerFileError:
        return LedgerFileError(f"cannot {what} the sweep's budget file {self.path}: {exc}; {self._fix()}")

    def _fix(self) -> str:
        return (f"fix: put hydra.sweep.dir ({self.path.parent}) on a file system with working file locks "
                "(every node of the sweep must see it), or run the sweep with the basic launcher")

    @contextmanager
    def _locked(self, mode: int) -> Iterator[int]:
        """The file open and flock-ed (``fcntl.LOCK_EX`` or ``LOCK_SH``), waiting at most LOCK_TIMEOUT_S."""
        with self._threads:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise self._error("open", exc) from None
            try:
                deadline = time.monotonic() + LOCK_TIMEOUT_S
                while True:
                    try:
                        fcntl.flock(fd, mode | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() > deadline:
                            raise LedgerFileError(f"the sweep's budget file {self.path} stayed locked for "
                                                  f"{LOCK_TIMEOUT_S:g} s; {self._fix()}") from None
                        time.sleep(LOCK_POLL_S)
                    except OSError as exc:  # a file system without locks
                        raise self._error("lock", exc) from None
                yield fd
            finally:
                os.close(fd)  # drops the lock

    def _load(self, fd: int) -> tuple[Tally, int]:
        """(the tally, the file's length); a new tally for an empty file or one of an earlier sweep."""
        try:
            raw = os.pread(fd, os.fstat(fd).st_size, 0)
        except OSError as exc:
            raise self._error("read", exc) from None
        if not raw.strip():
            return Tally(sweep=self.sweep), len(raw)
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.pop("format", None) != FORMAT:
                raise ValueError("not a ragbench budget file")
            tally = Tally(**data)
        except (ValueError, TypeError) as exc:
            raise LedgerFileError(f"the sweep's budget file {self.path} is not readable ({exc}); fix: delete "
                                  "it (the sweep's count restarts from 0) and rerun") from None
        if tally.sweep != self.sweep:  # an earlier sweep's file in the same folder
            tally = Tally(sweep=self.sweep)
        return tally, len(raw)

    def _store(self, fd: int, tally: Tally, length: int) -> None:
        """One write over the old text, padded with spaces to its length (JSON ignores them)."""
        try:
            os.pwrite(fd, tally.dump().ljust(length), 0)
        except OSError as exc:
            raise self._error("write", exc) from None

    def update(self, change: Callable[[Tally], T]) -> T:
        """``change(tally)`` under the lock, dead owners' reservations reaped first; the file is written
        when the tally changed."""
        with self._locked(fcntl.LOCK_EX) as fd:
            tally, length = self._load(fd)
            before = tally.dump()
            tally.reap(self._gone, self.owner)
            result = change(tally)
            if tally.dump() != before:
                tally.version += 1
                self._store(fd, tally, length)
            return result

    def read(self) -> Tally:
        """The tally as last written."""
        if not self.path.exists():
            return Tally(sweep=self.sweep)
        with self._locked(fcntl.LOCK_SH) as fd:
            return self._load(fd)[0]

    def begin(self) -> None:
        """Starts the sweep's clock (``max_minutes``) at the first limited job."""
        def start(tally: Tally) -> None:
            if tally.started is None:
                tally.started = time.time()
        self.update(start)
