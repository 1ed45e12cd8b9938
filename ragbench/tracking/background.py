"""A job's case artifacts written by a forked child while the job's own process goes on.

After a job's pipeline, its cases become ``cases.jsonl``, ``case_scores.json`` and the case table:
JSON encoding and the secret scan of ~14 MB on full LoCoMo, ~0.7 s of one core a job, while the other
core idles (a cached sweep job is single-threaded Python). ``StagedFiles`` runs that function in a
``fork()`` child, which sees the job's result without a copy or a pickle, and writes the files into a
staging folder; the process uploads the folder when the files are needed (``wait()``). In a sweep run
by the basic launcher that is when the next job starts (``ragbench.lifecycle``), so the files of job
``n`` are written while job ``n + 1`` runs.

What makes the fork safe: the child runs only pure Python (the serializers and ``ragbench.redact``) and
writes only into the staging folder. It never touches the MLflow store, torch, a logging handler or
stdout; it resets SIGINT/SIGTERM to their defaults (Ctrl-C stops it with the job), turns off the cyclic
collector (the parent's heap stays shared) and leaves with ``os._exit``. Whatever goes wrong in the
child -- an exception, a signal, no exit within ``CHILD_TIMEOUT_S`` -- the process writes the files
itself with the same function, so a failure is the one the job would have had without a child.
Without ``os.fork`` (Windows) and on macOS (fork after a framework like torch loaded is unsafe there),
or with ``tracking.background_artifacts=false``, the files are written in the process, at once.
"""

from __future__ import annotations

import gc
import logging
import os
import select
import shutil
import signal
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

log = logging.getLogger(__name__)

CHILD_TIMEOUT_S = 600.0  # a child still writing after this long is stopped; the process writes the files
_CHILD_ERROR = 70  # the child's exit status after an exception (its message comes through the pipe)

MakeFiles = Callable[[], Mapping[str, str]]


def can_fork() -> bool:
    """Whether files may be written by a forked child on this platform."""
    return hasattr(os, "fork") and sys.platform.startswith("linux")


class StagedFiles:
    """The files ``make()`` returns (name -> text), written into ``folder`` by a forked child (``fork=True``
    where ``can_fork()``) or at once; ``wait()`` returns when they are all there."""

    def __init__(self, make: MakeFiles, *, fork: bool) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="ragbench-artifacts-"))
        self._make: MakeFiles | None = make
        self._pid: int | None = None
        self._pipe: int | None = None
        self.complete = False  # every file is in the folder
        if fork and can_fork():
            self._fork()
        else:
            self._write()

    # ------------------------------------------------------------------ the child
    def _write(self) -> None:
        assert self._make is not None
        for name, text in self._make().items():
            path = self.folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        self.complete = True

    def _fork(self) -> None:
        read, write = os.pipe()
        try:
            with warnings.catch_warnings():  # 3.12+: "multi-threaded, fork() may deadlock": see the module docstring
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError as exc:  # no memory or process slot for a child: the files are written here
            os.close(read)
            os.close(write)
            log.warning("no background writer for the case artifacts (%s); writing them in this process", exc)
            self._write()
            return
        if pid == 0:  # pragma: no cover - the child (coverage does not follow it)
            status = _CHILD_ERROR
            try:
                os.close(read)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                gc.disable()
                self._write()
                status = 0
            except BaseException as exc:  # noqa: BLE001 - reported through the pipe, written again by the parent
                try:
                    os.write(write, f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[:2000])
                except OSError:
                    pass
            finally:
                os._exit(status)
        os.close(write)
        self._pid, self._pipe = pid, read

    # ------------------------------------------------------------------ the process
    @property
    def pending(self) -> bool:
        """A child is (or may still be) writing."""
        return self._pid is not None

    def wait(self, timeout_s: float = CHILD_TIMEOUT_S) -> None:
        """Returns once every file is in ``folder``: the child's, or written here when the child failed
        (the function's own exception then propagates)."""
        if self._pid is not None:
            problem = self._reap(timeout_s)
            self.complete = problem is None
            if problem is not None:
                log.warning("the background writer of the case artifacts %s; writing them in this process", problem)
                shutil.rmtree(self.folder, ignore_errors=True)
                self.folder.mkdir(parents=True)
                self._write()
        self._make = None  # the job's result is no longer held

    def cancel(self) -> bool:
        """Stops a child still writing (an interrupt); returns whether the files were complete."""
        if self._pid is not None:
            self.complete = self._reap(0.0) is None
        self._make = None
        return self.complete

    def discard(self) -> None:
        """Removes the staging folder (after the upload, or when the files are not wanted)."""
        if self._pid is not None:
            self._reap(0.0)
        shutil.rmtree(self.folder, ignore_errors=True)

    def _reap(self, timeout_s: float) -> str | None:
        """Waits up to ``timeout_s`` for the child (killed after that); None when it wrote every file,
        else what went wrong."""
        assert self._pid is not None and self._pipe is not None
        pid, pipe = self._pid, self._pipe
        message = b""
        deadline = time.monotonic() + timeout_s
        while True:  # the pipe reaches EOF when the child exits (its message, if any, comes first)
            left = max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([pipe], [], [], left)
            if not ready:
                os.kill(pid, signal.SIGKILL)
                message += b"(no exit in time)"
                break
            chunk = os.read(pipe, 4096)
            if not chunk:
                break
            message += chunk
        _, status = os.waitpid(pid, 0)
        os.close(pipe)
        self._pid = self._pipe = None
        if os.waitstatus_to_exitcode(status) == 0 and not message:
            return None
        code = os.waitstatus_to_exitcode(status)
        how = f"was stopped by signal {-code}" if code < 0 else f"exited with status {code}"
        text = message.decode("utf-8", "replace")
        return f"{how}" + (f" ({text})" if text else "")
