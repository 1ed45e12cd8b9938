"""A write that fails for want of space (the MLflow store, its artifacts, the stage cache), as one error
that stops the sweep at the first failed write.

A full disk fails every later write and job the same way: recording each job as FAILED and going on (what
a job's other errors do) printed one traceback per write and left runs RUNNING. ``FullDiskGuard`` wraps
the MLflow client of a store and raises ``DiskFull`` naming the store file (or the artifact folder) and
its free space; ``disk_full`` names any other write's full disk, ``where_full`` the one of a job's write
(the stage cache, the job's output folder, temporary files: the one that is full). ``DiskFull`` is not an
``Exception``, so it passes every ``except Exception`` on its way up (a job's failure handling, Hydra's);
``ragbench.job`` ends the open runs KILLED where the store still takes that and ``__main__`` prints
its one line.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragbench.tracking.disk_space import FULL_TEXT as _FULL_TEXT
from ragbench.tracking.disk_space import free_bytes, full_disk
from ragbench.tracking.disk_space import size_text as _size
from ragbench.tracking.store import sqlite_path

__all__ = ["DiskFull", "FullDiskGuard", "Place", "disk_full", "free_bytes", "full_disk", "job_places",
           "where_full"]
_RUN_ID = re.compile(r"[0-9a-f]{32}")


def _ids(runs: Sequence[str]) -> str:
    return ", ".join(r[:8] for r in runs)


class DiskFull(BaseException):
    """A write failed for want of space: the MLflow store, its artifacts, the stage cache. Not an
    ``Exception``: like an interrupt it must pass every ``except Exception`` on its way up (a job's failure
    handling, Hydra's, a callback's), because every later write and job would fail the same way. The job's
    run ends KILLED where the store still takes that (``ragbench.job``); ``__main__`` prints ``line()``
    and exits 1."""

    def __init__(self, *, what: str, path: Path, key: str, cause: str, run_id: str | None = None) -> None:
        self.what, self.path, self.key, self.cause, self.run_id = what, Path(os.path.abspath(path)), key, cause, run_id
        self.free = free_bytes(path)
        self.closed: list[str] = []  # runs ended KILLED on the way out
        self.left: list[str] = []  # runs the store would not even close: a later run closes them (stale)
        super().__init__(self.line())

    def __reduce__(self) -> tuple[Any, ...]:  # from a launcher's worker process back to the sweep
        return (_disk_full_again, (self.what, str(self.path), self.key, self.cause, self.run_id, self.free,
                                   self.closed, self.left))

    def line(self) -> str:
        """The one line: what is full, the free space, what became of the runs, and the fix."""
        closed, left = list(dict.fromkeys(self.closed)), list(dict.fromkeys(self.left))
        runs = f"; run {_ids(closed)} ended KILLED" if closed else ""
        if left:
            runs += (f"; run {_ids(left)} left RUNNING: the next run on this store closes "
                     f"{'it' if len(left) == 1 else 'them'} as KILLED")
        move = f", or point {self.key} at a disk with room" if self.key else ""
        return (f"no space left for {self.what} {self.path} ({_size(self.free)} free there): {self.cause}; "
                f"stopped at the first failed write{runs}. fix: free space there{move}, then rerun the same "
                "command: finished jobs are reused and the stage cache keeps what was built")


def _disk_full_again(what: str, path: str, key: str, cause: str, run_id: str | None, free: int | None,
                     closed: list[str], left: list[str]) -> DiskFull:
    full = DiskFull(what=what, path=Path(path), key=key, cause=cause, run_id=run_id)
    full.free, full.closed, full.left = free, list(closed), list(left)
    return full


def disk_full(exc: BaseException, *, what: str, path: Path, key: str, run_id: str | None = None) -> DiskFull | None:
    """``exc`` as a DiskFull naming ``what`` at ``path`` (an OSError's own file, when it names one), or None
    when it is not a full disk."""
    cause = full_disk(exc)
    if cause is None:
        return None
    if isinstance(cause, OSError) and cause.filename:
        path = Path(str(cause.filename))
    match = _FULL_TEXT.search(str(cause))
    text = cause.strerror if isinstance(cause, OSError) and cause.strerror else match.group(0) if match else "full"
    return DiskFull(what=what, path=path, key=key, cause=text, run_id=run_id)


@dataclass(frozen=True)
class Place:
    """Where a job writes: what it is (``the stage cache``), its folder, the setting that moves it."""

    what: str
    path: Path
    key: str


def where_full(exc: BaseException, places: Sequence[Place], *, run_id: str | None = None) -> DiskFull | None:
    """``exc`` as a DiskFull naming the disk that is full, or None when it is not a full disk. A write that
    names its file (an ``open``) is the place holding that file (the file itself when no place does); one
    that names none (a ``write`` call, numpy's short write) is the place whose disk has the least room."""
    cause = full_disk(exc)
    if cause is None:
        return None
    failed = Path(os.path.abspath(cause.filename)) if isinstance(cause, OSError) and cause.filename else None
    homes = [(Path(os.path.abspath(p.path)), p) for p in places]
    if failed is not None:
        inside = [(home, p) for home, p in homes if failed.is_relative_to(home)]
        place = max(inside, key=lambda hp: len(hp[0].parts))[1] if inside else Place("the file", failed, "")
        return disk_full(cause, what=place.what, path=failed, key=place.key, run_id=run_id)
    room = {p: free_bytes(home) for home, p in homes}
    place = min(places, key=lambda p: (room[p] is None, room[p] or 0))  # a tie: the first listed
    return disk_full(cause, what=place.what, path=place.path, key=place.key, run_id=run_id)


def job_places(cache: Path, record: Path) -> list[Place]:
    """Where a job writes besides the MLflow store (whose client names its own full disk): the job's output
    folder (its ``record`` and Hydra's files and log), the stage cache, temporary files."""
    return [Place("the job's output folder", record.parent, "hydra.run.dir / hydra.sweep.dir"),
            Place("the stage cache", cache, "cache.dir"),
            Place("temporary files", Path(tempfile.gettempdir()), "TMPDIR")]


def _drop_full_disk(record: logging.LogRecord) -> bool:
    return not (record.exc_info and record.exc_info[1] is not None and full_disk(record.exc_info[1]))


@functools.lru_cache(maxsize=1)
def _quiet_mlflow_full_disk() -> None:
    """MLflow logs a database error with its traceback before it raises it; a full disk is reported once,
    as ``DiskFull``'s line, so that log record is dropped (every other one is kept)."""
    logging.getLogger("mlflow.store.db.utils").addFilter(_drop_full_disk)


class FullDiskGuard:
    """The MLflow client of one store, with a write that fails for want of space raised as ``DiskFull``
    naming the store (the sqlite file, or the artifact folder for an upload) and the run it was for."""

    def __init__(self, target: Any, *, uri: str, artifact_root: str) -> None:
        self._target, self._uri, self._artifacts = target, uri, artifact_root
        _quiet_mlflow_full_disk()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_target", "_uri", "_artifacts"):  # pickle's probes (launchers)
            raise AttributeError(name)
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except Exception as exc:
                run_id = next((a for a in args if isinstance(a, str) and _RUN_ID.fullmatch(a)), None)
                upload = name.startswith("log_artifact")
                db = sqlite_path(self._uri)
                full = disk_full(exc, what="the MLflow artifacts" if upload or db is None else "the MLflow store",
                                 path=Path(self._artifacts) if upload or db is None else db,
                                 key="tracking.artifact_root" if upload else "tracking.uri", run_id=run_id)
                if full is None:
                    raise
                raise full from exc

        return call

