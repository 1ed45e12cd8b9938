"""A wave of a job's LLM requests answered together (``llm.batch=true``, ``llm=local``): each case's step (its
generation, or its judges) runs in a thread of its own; a request that misses the reply cache is added to the
wave and its step waits; when every running step waits (or is done), the wave's requests go out, one
answerer per model and role (``WaveAnswerer``: a provider batch, ``ragbench.llm.batch.BatchRunner``, or the
local model, ``ragbench.llm.local.runner.LocalRunner``), and the waiting steps go on with their replies,
through the client's normal path (the same reply checks, parsing, caching and accounting). A step whose
requests depend on earlier replies (a claim judge: claims, then their checks) waits once per link: one
flush per link, every case's link in the same batch. No exception carries a request out of a step and no
step runs twice.

The wave is attached to the clients it serves (``serving``), never to the process: a client without one
sends its requests at once. A flush runs in the thread that runs the wave (the main thread of a job), so
the interrupt checks of a batch's polls and of the local model's batches are safe points.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from ragbench.errors import LLMError
from ragbench.llm.batch import BatchReply, check_provider
from ragbench.llm.local import is_local

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_FLUSHES = 50  # a wave still waiting after this many flushes is a loop, not a chain of requests
MAX_STEPS = 1024  # steps (threads) of one wave run together; a larger wave runs in slices of this many


class WaveStopped(BaseException):  # noqa: N818 - not an error of the case: the wave stopped under it
    """Raised in a waiting step when the wave stopped (an interrupt, a batch that failed): the step ends
    without a result and the wave's own error goes up from ``run``. A BaseException, so that no case is
    recorded as failed by it."""


@dataclass(frozen=True)
class _Pending:
    client: Any  # the LLMClient that asked (ragbench.llm.client; not imported: no cycle)
    body: dict[str, Any]
    request: dict[str, Any]
    cache_if: Callable[[str], bool] | None
    step: int  # the step that asked first: a flush sends its requests in step order, however threads raced


class Wave:
    """A job's waves of requests: ``run`` runs one wave's steps; ``wait`` is how a step's request joins it.

    ``default``: whether a client whose ``batch`` is None (an LLM judge without its own switch) waits for
    the wave or sends at once. Thread-safe."""

    def __init__(self, *, default: bool = True, sleep: Callable[[float], None] = time.sleep) -> None:
        self.default = default
        self.sleep = sleep
        self._cond = threading.Condition()
        self._pending: dict[tuple[Any, ...], dict[str, _Pending]] = {}
        self._replies: dict[str, BatchReply] = {}
        self._taken: set[str] = set()
        self._running = 0  # steps of the current run neither waiting nor done
        self._waiting: dict[str, int] = {}  # per custom id: the steps waiting for its reply
        self._stopped = False
        self._slots = threading.BoundedSemaphore(1)  # how many steps of a run may run at once (run's workers)
        self._step = threading.local()  # the index of the step a wave thread runs (``_Pending.step``)
        self.batch_ids: list[str] = []  # the provider batches that answered this job's requests
        self.rounds = 0  # flushes so far

    # ------------------------------------------------------------------ what a client asks
    def defers(self, client: Any) -> bool:
        """Whether ``client``'s uncached requests wait for the wave."""
        flag = getattr(client, "batch", None)
        return self.default if flag is None else bool(flag)

    def take(self, custom_id: str) -> tuple[BatchReply, bool] | None:
        """The wave's reply to a request and whether this is its first use (a duplicate request of
        another case is served like a cache hit: it was paid for once), or None."""
        with self._cond:
            reply = self._replies.get(custom_id)
            if reply is None:
                return None
            first = custom_id not in self._taken
            self._taken.add(custom_id)
            return reply, first

    def peek(self, custom_id: str) -> BatchReply | None:
        """The reply a flush brought for a request, without taking it."""
        with self._cond:
            return self._replies.get(custom_id)

    def answered(self, custom_id: str) -> bool:
        """Whether a flush of this job already brought a reply (or an error) for the request."""
        with self._cond:
            return custom_id in self._replies

    def defer(self, client: Any, custom_id: str, body: Mapping[str, Any], request: Mapping[str, Any],
              cache_if: Callable[[str], bool] | None = None) -> None:
        """Adds a request to the next flush's batch of ``client``'s model and role (once per custom id)."""
        group = (client.model, client.api_base, client.api_key_env, client.role)
        with self._cond:
            self._pending.setdefault(group, {}).setdefault(
                custom_id, _Pending(client, dict(body), dict(request), cache_if, getattr(self._step, "index", -1)))

    def wait(self, client: Any, custom_id: str, body: Mapping[str, Any], request: Mapping[str, Any],
             cache_if: Callable[[str], bool] | None = None) -> None:
        """Adds the request (``defer``) and blocks the calling step until a flush has answered it."""
        self.defer(client, custom_id, body, request, cache_if)
        self._slots.release()  # another step runs meanwhile
        with self._cond:
            self._running -= 1
            self._waiting[custom_id] = self._waiting.get(custom_id, 0) + 1
            self._cond.notify_all()
            while custom_id not in self._replies and not self._stopped:
                self._cond.wait()  # the flush that answers it counts this step as running again
        self._slots.acquire()
        if self._stopped:
            raise WaveStopped(custom_id)

    @property
    def pending(self) -> int:
        with self._cond:
            return sum(len(v) for v in self._pending.values())

    # ------------------------------------------------------------------ running a wave
    @contextmanager
    def serving(self, clients: Iterable[Any]) -> Iterator[Wave]:
        """Attaches this wave to ``clients`` (``LLMClient.wave``) for the block."""
        attached = [c for c in dict.fromkeys(clients) if c is not None and hasattr(c, "wave")]
        before = [c.wave for c in attached]
        for c in attached:
            c.wave = self
        try:
            yield self
        finally:
            for c, was in zip(attached, before, strict=True):
                c.wave = was

    def run(self, steps: Sequence[Callable[[], T]], done: Callable[[int, T], None] | None = None, *,
            workers: int = 1) -> list[T]:
        """Runs every step, each in a thread of its own, at most ``workers`` at once besides those waiting
        (the generator's ``max_concurrency``: one for a local model, whose tokenizer is not raced);
        flushes whenever all steps wait or are done. ``done`` is called with each result as its step ends,
        in this thread (a safe point). Results in step order. More than ``MAX_STEPS`` steps run in slices
        (a batch per slice): one thread per step, not one per question of a large set."""
        out: list[T] = []
        for start in range(0, len(steps), MAX_STEPS):
            out.extend(self._run(steps[start:start + MAX_STEPS], start, done, workers))
        return out

    def _run(self, steps: Sequence[Callable[[], T]], offset: int, done: Callable[[int, T], None] | None,
             workers: int) -> list[T]:
        results: dict[int, T] = {}
        finished: list[int] = []
        errors: list[BaseException] = []

        def body(i: int) -> None:
            self._step.index = i
            self._slots.acquire()
            try:
                if self._stopped:  # not started before the wave stopped: dropped, not run
                    raise WaveStopped(str(i))
                results[i] = steps[i]()
            except WaveStopped:
                pass
            except BaseException as exc:  # noqa: BLE001 - a step's own error stops the wave, raised in run
                errors.append(exc)
            finally:
                self._slots.release()
                with self._cond:
                    self._running -= 1
                    finished.append(i)
                    self._cond.notify_all()

        with self._cond:
            self._stopped, self._running, self._waiting = False, len(steps), {}
            self._slots = threading.BoundedSemaphore(max(1, workers))
        threads = [threading.Thread(target=body, args=(i,), name=f"ragbench-wave-{i}", daemon=True)
                   for i in range(len(steps))]
        for t in threads:
            t.start()
        seen = 0
        try:
            while seen < len(steps):
                with self._cond:
                    while len(finished) == seen and not (self._running == 0 and self._pending):
                        self._cond.wait()
                    now, flush = finished[seen:], self._running == 0 and bool(self._pending)
                for i in now:
                    seen += 1
                    if errors:
                        raise errors[0]
                    if done is not None and i in results:
                        done(offset + i, results[i])
                if flush and seen < len(steps):
                    self.flush()
        except BaseException:
            with self._cond:
                self._stopped = True
                self._cond.notify_all()
            raise
        finally:
            for t in threads:
                t.join()
        if errors:
            raise errors[0]
        return [results[i] for i in range(len(steps))]

    def flush(self) -> None:
        """Sends the waiting requests, one answerer per model and role, and keeps the replies (each client
        also writes them to its reply cache: a rerun is a cache hit)."""
        if self.rounds >= MAX_FLUSHES:
            raise LLMError(f"{self.pending} requests still wait after {MAX_FLUSHES} batch rounds; "
                           "fix: set llm.batch=false")
        with self._cond:
            groups, self._pending = self._pending, {}
        self.rounds += 1
        for group in groups.values():
            # in step order (the same batch file and the same local batches in every run), not in the order
            # the steps' threads happened to reach ``defer``
            requests = dict(sorted(group.items(), key=lambda item: item[1].step))
            client = next(iter(requests.values())).client
            runner = client.batch_runner(sleep=self.sleep)
            log.info("%s: batch round %d: %d requests to %s", client.role, self.rounds, len(requests),
                     client.model)
            replies = runner.run({cid: p.body for cid, p in requests.items()})
            if runner.batch_id and runner.batch_id not in self.batch_ids:
                self.batch_ids.append(runner.batch_id)
            for cid, p in requests.items():
                client.keep_batch_reply(p.request, replies[cid], p.cache_if)
            with self._cond:
                self._replies.update(replies)
                for cid in replies:  # its waiting steps run again: no other flush before they wait or end
                    self._running += self._waiting.pop(cid, 0)
                self._cond.notify_all()


def job_wave(generator: Any, judges: Iterable[Any]) -> Wave | None:
    """The job's waves when its generator (``llm.batch``) or a judge (``judge.batch``) asks for batches (a
    local model always does), else None: requests are sent at once. An LLM judge without its own switch
    follows a provider batch: its provider is checked here, before any case runs (one line for a
    provider without a batch API)."""
    clients = [c for c in (getattr(x, "client", None) for x in (generator, *judges))
               if c is not None and hasattr(c, "batch") and hasattr(c, "model")]
    if not any(c.batch is True for c in clients):
        return None
    if all(is_local(c.model) for c in clients if c.batch is True):  # only local models (ragbench.llm.local):
        return Wave(default=False)  # their waves, and no provider batch for a judge that did not ask
    switch = "llm.batch" if getattr(getattr(generator, "client", None), "batch", None) is True else "judge.batch"
    for client in clients:
        if client.batch is None:
            check_provider(client.model, client.role, switch)
    return Wave(default=True)
