"""The sentence-transformers encoder in a forked worker process that starts with the run or sweep (opt-in:
``embedder.worker=true``).

Why opt-in (issue 28's rule: a fork stays on by default only if it buys >= 10% on the full-size sweep,
cold and warm): it moves the encoder's import onto the idle core, which saves wall time on a cold run,
but no CPU; on a warm cache it imports the encoder for nothing (benchmarks/bench_warm_cpu.py).

``import sentence_transformers`` (torch, transformers) is 7-10 s of one core. A sweep spends its first
5-7 s on one core too: importing MLflow, opening the store, composing each job's config. Forked before
either, the worker imports the encoder while the process sets up; when a job first needs vectors, the
worker loads the model (the same ``shared_model`` as in the process) and encodes every batch the job
asks for, while the process waits on the pipe. The process never imports torch. The vectors are the same
bytes: the same library, thread count and ``encode`` calls with the same arguments.

What keeps the fork safe: it happens before torch or any thread exists in the process (otherwise no
worker is started), with SIGINT/SIGTERM held during ``fork()`` (see ``ragbench.tracking.background``).
The worker ignores SIGINT (Ctrl-C reaches the whole process group; the process decides, and stops the
worker), never touches a logging handler, the MLflow store or a file, and leaves with ``os._exit``. It
exits by itself when the process is gone (the pipe's end of file).

Whatever goes wrong -- no fork, the import fails, the model cannot load there, the worker dies, no reply
to a load within ``LOAD_TIMEOUT_S``, an interrupt while waiting -- the worker is stopped and the embedder
loads the model in the process as without one, so any error is the one the job would have had. Started
by ``EncoderWorkerCallback`` (``hydra.callbacks.encoder_worker``) for a single run or a sweep whose jobs
run in this process (the basic launcher), when the run's embedder is a sentence-transformers one with
``embedder.worker=true`` and its retriever needs vectors. A warm-cache sweep encodes nothing, and then
the worker only imported on the otherwise idle core (CPU spent for nothing: hence off by default); it is
stopped when the run or sweep ends.
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, Pipe
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ragbench.errors import RagbenchError

log = logging.getLogger(__name__)

LOAD_TIMEOUT_S = 600.0  # for the worker's import and model load: beyond it the process loads the model
EXIT_GRACE_S = 2.0  # a worker whose pipe closed is reaped within this (to name its signal), else killed
BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
ENCODER = "ragbench.embed.sentence_transformer.SentenceTransformerEmbedder"
_EXIT_BROKEN = 70

ModelKey = tuple[str, str | None, int | None]  # (source, device, max_seq_length), as shared_model's


class WorkerGone(RagbenchError):
    """The worker cannot serve (stopped, died, failed): the caller encodes in its own process."""


def _import_encoder() -> None:  # pragma: no cover - runs in the worker
    import sentence_transformers  # noqa: F401 - the point: the import runs beside the process's set-up


def _load_model(source: str, device: str | None, max_seq_length: int | None) -> Any:  # pragma: no cover
    from ragbench.embed.sentence_transformer import shared_model

    return shared_model(source, device, max_seq_length)


def _serve(conn: Connection, other: Connection, prepare: Callable[[], None],
           factory: Callable[[str, str | None, int | None], Any]) -> None:  # pragma: no cover - the worker
    """The worker's whole life: import, then answer requests until the pipe closes; ``os._exit`` always."""
    status = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        other.close()
        gc.freeze()  # the inherited heap stays shared: collections scan only what the worker makes
        try:
            prepare()
            broken = None
        except BaseException as exc:  # noqa: BLE001 - told to the process at its first request
            broken = f"{type(exc).__name__}: {exc}"
        models: dict[ModelKey, Any] = {}
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                break  # the process is gone or stopped the worker
            try:
                if broken:
                    raise WorkerGone(f"the encoder did not import there ({broken})")
                reply = ("ok", _answer(request, models, factory))
            except BaseException as exc:  # noqa: BLE001 - answered; the process decides what follows
                reply = ("error", f"{type(exc).__name__}: {exc}"[:2000])
            try:
                conn.send(reply)
            except (OSError, ValueError):
                break
    except BaseException:  # noqa: BLE001 - nothing may escape into the parent's code
        status = _EXIT_BROKEN
    finally:
        os._exit(status)


def _answer(request: tuple[Any, ...], models: dict[ModelKey, Any],
            factory: Callable[[str, str | None, int | None], Any]) -> Any:  # pragma: no cover - the worker
    kind, key, *rest = request
    if kind == "load":
        if key not in models:
            models.clear()  # one model at a time, as shared_model keeps in a process
            models[key] = factory(*key)
        from ragbench.embed.sentence_transformer import dimension

        return dimension(models[key])
    if kind == "encode":
        texts, options = rest
        return models[key].encode(texts, **options)
    raise ValueError(f"unknown request {kind!r}")


class EncoderWorker:
    """A forked worker holding the encoder; ``model()`` returns a handle whose ``encode`` runs there."""

    def __init__(self, prepare: Callable[[], None] = _import_encoder,
                 factory: Callable[[str, str | None, int | None], Any] = _load_model) -> None:
        self.problem: str | None = None
        from ragbench.tracking.background import fork

        mine, theirs = Pipe()
        try:
            pid = fork(lambda: _serve(theirs, mine, prepare, factory))  # signals held while it forks
        except OSError:
            mine.close()
            theirs.close()
            raise
        theirs.close()
        self.pid: int | None = pid
        self.owner = os.getpid()
        self._conn: Connection | None = mine
        self._lock = threading.Lock()

    @property
    def alive(self) -> bool:
        return self._conn is not None and self.owner == os.getpid()

    def model(self, source: str, device: str | None, max_seq_length: int | None,
              timeout_s: float = LOAD_TIMEOUT_S) -> RemoteModel:
        """The model loaded in the worker (waits for the worker's import); WorkerGone when it cannot."""
        key: ModelKey = (source, device, max_seq_length)
        return RemoteModel(self, key, int(self.request(("load", key), timeout_s=timeout_s)))

    def request(self, message: tuple[Any, ...], timeout_s: float | None = None) -> Any:
        """One request and its answer; any failure stops the worker and raises WorkerGone."""
        with self._lock:
            conn = self._conn
            if conn is None or self.owner != os.getpid():
                raise WorkerGone(self.problem or "the encoder worker is stopped")
            try:
                conn.send(message)
                if timeout_s is not None and not conn.poll(timeout_s):
                    self._stop(f"no reply within {timeout_s:g} s")
                    raise WorkerGone(str(self.problem))
                kind, value = conn.recv()
            except (EOFError, OSError) as exc:
                self._stop(f"the worker stopped ({type(exc).__name__})", gone=True)
                raise WorkerGone(str(self.problem)) from None
            except BaseException:  # an interrupt mid-request: the answer can no longer be matched to it
                self._stop("interrupted while it worked")
                raise
        if kind != "ok":
            raise WorkerGone(str(value))
        return value

    def stop(self) -> None:
        with self._lock:
            self._stop(None)

    def _stop(self, why: str | None, gone: bool = False) -> None:
        if self._conn is None or self.owner != os.getpid():
            return
        self._conn.close()
        self._conn = None
        assert self.pid is not None
        try:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            deadline = time.monotonic() + (EXIT_GRACE_S if gone else 0.0)
            while not done and time.monotonic() < deadline:  # its pipe closed: it is exiting, or exited
                time.sleep(0.01)
                done, status = os.waitpid(self.pid, os.WNOHANG)
            if not done:  # mid-encode, or still importing: nothing of its state is worth keeping
                os.kill(self.pid, signal.SIGKILL)
                _, status = os.waitpid(self.pid, 0)
                code = None
            else:
                code = os.waitstatus_to_exitcode(status)
        except ChildProcessError:  # already reaped (a test, or a SIGCHLD handler)
            code = None
        self.pid = None
        if why is not None:
            how = "" if code is None else (f"; stopped by signal {-code}" if code < 0 else f"; exit status {code}")
            self.problem = f"{why}{how}"


class RemoteModel:
    """The worker's model, with the two calls the embedder makes of a ``SentenceTransformer``."""

    def __init__(self, worker: EncoderWorker, key: ModelKey, dim: int) -> None:
        self._worker = worker
        self._key = key
        self._dim = dim

    def encode(self, texts: Sequence[str], **options: Any) -> Any:
        return self._worker.request(("encode", self._key, list(texts), options))

    def get_embedding_dimension(self) -> int:
        return self._dim


_WORKER: EncoderWorker | None = None


def current() -> EncoderWorker | None:
    """The running worker of this process, if any (never one inherited by a forked child)."""
    return _WORKER if _WORKER is not None and _WORKER.alive else None


def start(**kwargs: Any) -> EncoderWorker | None:
    """Forks the worker (once per process); None when ``fork()`` fails."""
    global _WORKER
    if current() is None:
        try:
            _WORKER = EncoderWorker(**kwargs)
        except OSError as exc:
            log.debug("no encoder worker (fork failed: %s)", exc)
            return None
        atexit.register(stop)
        log.debug("encoder worker %s started", _WORKER.pid)
    return _WORKER


def stop() -> None:
    """Stops the worker of this process, if one runs."""
    worker = current()
    if worker is not None:
        worker.stop()


def _needs_vectors(node: Any) -> bool:
    """Whether a retriever config embeds: its class's ``needs_vectors``, or any child's (fusion)."""
    from hydra.utils import get_class

    children = node.get("children") if isinstance(node, DictConfig) else None
    if children:
        return any(_needs_vectors(child) for child in children)
    flag = getattr(get_class(str(node["_target_"])), "needs_vectors", True)
    return flag if isinstance(flag, bool) else True


def why_not(config: DictConfig, *, multirun: bool) -> str | None:
    """Why no worker serves this run or sweep (None: one does); the conditions of the module docstring."""
    from ragbench.tracking.background import can_fork

    launcher = OmegaConf.select(config, "hydra.launcher._target_", default=BASIC_LAUNCHER)
    embedder = config.get("embedder")
    if not can_fork():
        return "no fork() on this platform"
    if multirun and launcher != BASIC_LAUNCHER:
        return f"the jobs run in the launcher's processes ({launcher})"
    if not isinstance(embedder, DictConfig) or embedder.get("_target_") != ENCODER:
        return "the embedder is not sentence-transformers"
    if not embedder.get("worker", False):
        return "embedder.worker=false"
    if "torch" in sys.modules:
        return "torch is imported already (a fork after it is not safe)"
    if threading.active_count() > 1:
        return "another thread runs (a fork could copy a held lock)"
    try:
        if not _needs_vectors(config.retrieval.retriever):
            return "the retriever needs no vectors"
    except Exception as exc:  # noqa: BLE001 - a config the job itself will name; no worker meanwhile
        return f"the retriever's config does not say ({type(exc).__name__})"
    return None


class EncoderWorkerCallback(Callback):
    """Starts the worker before the run or sweep sets up, stops it when the run or sweep ends."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = bool(enabled)

    def _start(self, config: DictConfig, multirun: bool) -> None:
        reason = "hydra.callbacks.encoder_worker.enabled=false" if not self.enabled else why_not(config, multirun=multirun)
        if reason is None:
            start()
        else:
            log.debug("no encoder worker: %s", reason)

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._start(config, multirun=False)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._start(config, multirun=True)

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        stop()

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        stop()
