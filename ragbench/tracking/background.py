"""A job's case artifacts written by a forked child while the job's own process goes on.

After a job's pipeline, its cases become ``cases.jsonl``, ``case_scores.json`` and the case table:
JSON encoding and the secret scan of ~14 MB on full LoCoMo, ~0.7 s of one core a job, while the other
core idles (a cached sweep job is single-threaded Python). ``StagedFiles`` runs that function in a
``fork()`` child, which sees the job's result without a copy or a pickle, and writes the files into a
staging folder; the process uploads the folder when the files are needed (``wait()``). In a sweep run
by the basic launcher that is when the next job logs its result (``ragbench.lifecycle``), so the files
of job ``n`` are written while job ``n + 1`` runs. ``Child`` is the fork itself: one function run in a child,
its bytes (or what went wrong) back through a pipe.

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

from ragbench import signals

log = logging.getLogger(__name__)

CHILD_TIMEOUT_S = 600.0  # a child still writing after this long is stopped; the process writes the files
_CHILD_ERROR = 70  # the child's exit status after an exception (its message comes through the pipe)

MakeFiles = Callable[[], Mapping[str, str]]


def _child_main(work: Callable[[], bytes], read: int, write: int) -> None:  # pragma: no cover - in the child
    """The child's whole life: signals to their defaults, ``work()``, its bytes (or error) to the pipe,
    ``os._exit`` whatever happens (it must never return into the parent's code)."""
    status = _CHILD_ERROR
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.close(read)
        gc.disable()
        try:
            out = b"\0" + work()
            status = 0
        except BaseException as exc:  # noqa: BLE001 - reported through the pipe; the caller does the work
            out = b"\1" + f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[:2000]
        with os.fdopen(write, "wb") as pipe:
            pipe.write(out)
    except BaseException:  # noqa: BLE001 - nothing may escape the child
        status = _CHILD_ERROR
    finally:
        os._exit(status)


class Child:
    """``work()`` run in a forked child (see the module docstring for what keeps that safe); its bytes
    come back through a pipe. ``result()`` is them, or None with ``problem`` saying what went wrong."""

    def __init__(self, work: Callable[[], bytes]) -> None:
        self.problem: str | None = None
        read, write = os.pipe()
        try:
            pid = fork(lambda: _child_main(work, read, write))
        except OSError:  # no memory or process slot for a child: the caller does the work
            os.close(read)
            os.close(write)
            raise
        os.close(write)
        self._pid: int | None = pid
        self._pipe = read
        self._data: bytes | None = None

    @property
    def running(self) -> bool:
        """Not reaped yet."""
        return self._pid is not None

    def result(self, timeout_s: float = CHILD_TIMEOUT_S) -> bytes | None:
        """The child's bytes, waiting up to ``timeout_s`` (then it is killed); None when it failed."""
        if self._pid is not None:
            self._reap(timeout_s)
        return self._data

    def _reap(self, timeout_s: float) -> None:
        assert self._pid is not None
        pid, pipe, chunks = self._pid, self._pipe, []
        deadline = time.monotonic() + timeout_s
        late = False
        while True:  # the pipe reaches EOF when the child exits (after what it wrote)
            ready, _, _ = select.select([pipe], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                late = True
                break
            chunk = os.read(pipe, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        os.close(pipe)
        self._pid = None
        data, code = b"".join(chunks), os.waitstatus_to_exitcode(status)
        if code == 0 and data[:1] == b"\0" and not late:
            self._data = data[1:]
            return
        how = f"was stopped by signal {-code}" if code < 0 else f"exited with status {code}"
        said = data[1:].decode("utf-8", "replace") if data[:1] == b"\1" else ""
        self.problem = how + (f" ({said})" if said else "") + (" (no exit in time)" if late else "")


def fork(child_main: Callable[[], None]) -> int:
    """``os.fork()``; the child runs ``child_main``, which must end in ``os._exit``; the parent gets the pid.

    A signal whose handler raises inside fork()'s at-fork hooks (logging's lock release) is printed as
    "Exception ignored" and lost: the fork runs with signals held, raised in the parent once it is done
    (the child never leaves the held block: it resets its handlers and exits)."""
    with signals.deferred():
        with warnings.catch_warnings():  # 3.12+: "multi-threaded, fork() may deadlock": see the docstring
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child (coverage does not follow it); never returns
            child_main()
            os._exit(_CHILD_ERROR)  # a child_main that returned: it must never run the parent's code
    return pid


def can_fork() -> bool:
    """Whether files may be written by a forked child on this platform."""
    return hasattr(os, "fork") and sys.platform.startswith("linux")


class StagedFiles:
    """The files ``make()`` returns (name -> text), written into ``folder`` by a forked child (``fork=True``
    where ``can_fork()``) or at once; ``wait()`` returns when they are all there."""

    def __init__(self, make: MakeFiles, *, fork: bool) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="ragbench-artifacts-"))
        self._make: MakeFiles | None = make
        self._child: Child | None = None
        self.complete = False  # every file is in the folder
        if fork and can_fork():
            try:
                self._child = Child(self._write)
                return
            except OSError as exc:  # no memory or process slot for a child
                log.warning("no background writer for the case artifacts (%s); writing them in this process", exc)
        self._write()

    def _write(self) -> bytes:
        assert self._make is not None
        for name, text in self._make().items():
            path = self.folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        self.complete = True
        return b""

    @property
    def pending(self) -> bool:
        """A child is (or may still be) writing."""
        return self._child is not None and self._child.running

    def wait(self, timeout_s: float = CHILD_TIMEOUT_S) -> None:
        """Returns once every file is in ``folder``: the child's, or written here when the child failed
        (the function's own exception then propagates)."""
        if self._child is not None and not self.complete:
            self.complete = self._child.result(timeout_s) is not None
            if not self.complete:
                log.warning("the background writer of the case artifacts %s; writing them in this process",
                            self._child.problem)
                shutil.rmtree(self.folder, ignore_errors=True)
                self.folder.mkdir(parents=True)
                self._write()
        self._make = None  # the job's result is no longer held

    def cancel(self) -> bool:
        """Stops a child still writing (an interrupt); returns whether the files were complete."""
        if self._child is not None and not self.complete:
            self.complete = self._child.result(0.0) is not None
        self._make = None
        return self.complete

    def discard(self) -> None:
        """Removes the staging folder (after the upload, or when the files are not wanted)."""
        if self._child is not None:
            self._child.result(0.0)
        shutil.rmtree(self.folder, ignore_errors=True)
