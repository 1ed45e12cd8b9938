"""Which process owns a RUNNING MLflow run, and whether that process is gone (kill -9, OOM, a lost node).

Every run ragbench opens is tagged ``ragbench.owner = host:pid:start`` (``start`` is the process's start
time from ``/proc`` where there is one, so a reused pid is not mistaken for the owner). A later sweep
closes RUNNING runs whose owner is gone as KILLED, and leaves alone those of a live concurrent sweep.
"""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path

OWNER_TAG = "ragbench.owner"


def _stat(pid: int) -> list[str]:
    """``/proc/<pid>/stat`` fields after the command name (state first), or [] where there is none."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return []


def _start_time(pid: int) -> str:
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else ""  # field 22 of stat: the start time in clock ticks


@functools.cache
def owner() -> str:
    """This process as ``host:pid:start``."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def owner_gone(tag: str | None) -> bool | None:
    """True when the owning process is verifiably gone, False when it is alive, None when unknown
    (no tag, or another host)."""
    if not tag:
        return None
    parts = tag.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    host, pid_text, start = parts
    if host != socket.gethostname():
        return None
    pid = int(pid_text)
    if pid == os.getpid():
        return start != _start_time(pid) if start else False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, another user's process
    fields = _stat(pid)
    if fields and fields[0] in ("Z", "X"):  # a zombie: dead, only not yet reaped by its parent
        return True
    return bool(start) and len(fields) > 19 and fields[19] != start
