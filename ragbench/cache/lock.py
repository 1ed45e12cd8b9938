"""A cache entry's build lock: the wait is bounded, logged, and names the process that holds it.

Whoever takes the lock writes ``<lock>.holder`` (pid, host, start time, what it builds) beside it, so a
job that has to wait can say who it waits for, and a job that gives up can say whom to stop.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from ragbench.cache.files import write_json_atomic
from ragbench.errors import CacheLockTimeout
from ragbench.validate import real

log = logging.getLogger(__name__)
DEFAULT_TIMEOUT_S = 600.0
HOLDER_SUFFIX = ".holder"


def check_timeout(value: Any) -> float:
    """``cache.lock_timeout_s`` as a float: a finite number of seconds > 0 (the one numeric rule)."""
    return real("cache.lock_timeout_s", value, lo=0, lo_open=True, default=DEFAULT_TIMEOUT_S)


def holder_path(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name + HOLDER_SUFFIX)


def describe_holder(lock_path: Path) -> str:
    """'pid 123 on host h since 2026-01-01T00:00:00Z (building index entry ab12...)', or why not known."""
    path = holder_path(lock_path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return (f"pid {int(data['pid'])} on host {data['host']} since {data['since_utc']} "
                f"({data['what']})")
    except FileNotFoundError:
        return f"an unknown process (no holder file {path})"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"an unknown process (unreadable holder file {path}: {exc})"


@contextmanager
def hold(lock_path: Path, *, timeout_s: float, what: str) -> Iterator[None]:
    """Holds ``lock_path`` while the block runs; waits at most ``timeout_s`` seconds for another holder,
    then raises :class:`CacheLockTimeout` naming the holder and the fix."""
    lock = FileLock(str(lock_path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        start = time.monotonic()
        log.warning("waiting up to %g s (cache.lock_timeout_s) for the cache lock %s, held by %s",
                    timeout_s, lock_path, describe_holder(lock_path))
        try:
            lock.acquire(timeout=timeout_s)
        except Timeout:
            raise CacheLockTimeout(
                f"the cache lock {lock_path} is still held after {timeout_s:g} s by "
                f"{describe_holder(lock_path)}\n  fix: let that job finish (it builds this entry for both "
                f"of you) and rerun, or stop it; raise cache.lock_timeout_s to wait longer; a lock is freed "
                f"when its process exits, so a lock held by no running process means the folder is on a "
                f"file system without working locks (use a local cache.dir)") from None
        log.info("got the cache lock %s after %.1f s", lock_path, time.monotonic() - start)
    holder = holder_path(lock_path)
    try:
        try:
            write_json_atomic(holder, {
                "pid": os.getpid(), "host": socket.gethostname(), "since": time.time(),
                "since_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "what": what,
            })
        except OSError as exc:  # the note only helps a waiting job name us; the lock itself is held
            log.debug("cannot write the lock holder note %s: %s", holder, exc)
        yield
    finally:
        holder.unlink(missing_ok=True)
        lock.release()
