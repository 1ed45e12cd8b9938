"""LocalClient: the ``LLMClient`` whose requests a local model answers, through the client's own paths.

Every uncached request waits for its wave (``ragbench.llm.wave``), as a provider batch's would, and the
wave is answered by ``LocalRunner``: the same reply cache (``reply_key``), the same reply checks, parsing
and ledger. A request made outside a job's waves (``python -m ragbench.judge calibrate``, ``datasets
generate``, a query rewrite before the cases) runs in a wave of its own. The
weights are found when the client is built (a bad path is one line at build time) and loaded once per
process, on first use or at the preflight.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ragbench.cache.keys import reply_key
from ragbench.errors import ConfigError, LLMError
from ragbench.llm.batch import BatchReply
from ragbench.llm.client import JOB_STORE, REPEAT, LLMClient, Message
from ragbench.llm.local.engine import LocalModel, load
from ragbench.llm.local.runner import LocalRunner
from ragbench.llm.local.source import resolve
from ragbench.llm.replies import Completion
from ragbench.llm.wave import Wave

OVERFLOW = ("truncate_contexts", "refuse")
REQUEST = "_request"  # the key of a wave line's request (LocalClient._body)
_SOLO_TURN = threading.Lock()  # a request made outside a job's waves: one such wave at a time


class LLMContextError(LLMError):
    """A prompt longer than the local model's window (``llm.context_overflow=refuse``)."""


class LocalClient(LLMClient):
    """A local model behind ``LLMClient``'s interface. ``model``: None or ``local`` (the bundled model),
    ``local/<reference>`` or a reference (``ragbench.llm.local.source.resolve``). The litellm-only keys
    (``api_base``, ``timeout``, ``num_retries``...) are accepted and have no effect."""

    def __init__(
        self,
        *,
        model: str | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = 256,
        role: str = "llm",
        cache: Any = JOB_STORE,
        max_reply_chars: int = 100_000,
        device: str = "auto",
        dtype: str = "auto",
        threads: int | None = None,
        batch_size: int = 8,
        top_p: float = 1.0,
        seed: int | None = 0,
        context_overflow: str = "truncate_contexts",
        **_litellm: Any,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"{role}.batch_size must be an integer >= 1, got {batch_size!r}")
        if context_overflow not in OVERFLOW:
            raise ConfigError(
                f"{role}.context_overflow={context_overflow!r} is not valid; choose {' or '.join(OVERFLOW)}"
            )
        if not 0 < float(top_p) <= 1:
            raise ConfigError(f"{role}.top_p must be in (0, 1], got {top_p!r}")
        self.source = resolve(model, role)
        super().__init__(
            model=self.source.name,
            temperature=float(temperature),
            max_tokens=max_tokens,
            max_concurrency=1,
            max_reply_chars=max_reply_chars,
            role=role,
            cache=cache,
            batch=False,
        )
        self.batch = (
            True  # every uncached request waits for the wave (ragbench.llm.wave): batched generation
        )
        self.max_new_tokens = int(max_tokens or 256)
        self.top_p = float(top_p)
        self.seed = seed
        self.device = device
        self.dtype = dtype
        self.threads = threads
        self.batch_size = batch_size
        self.context_overflow = context_overflow
        self._kept: set[str] = set()
        self._kept_lock = threading.Lock()
        self._latency: dict[str, float] = {}

    def __repr__(self) -> str:
        return f"LocalClient(role={self.role!r}, model={self.model!r})"

    def local_model(self) -> LocalModel:
        """The loaded model (loaded once per process)."""
        return load(self.source, device=self.device, dtype=self.dtype, threads=self.threads, role=self.role)

    def where(self) -> str:
        return self._where()

    def _where(self) -> str:
        return f"{self.role} model {self.model!r} (local)"

    def _request(
        self,
        messages: Sequence[Message],
        key_extra: Mapping[str, Any] | None,
        response_format: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        request = super()._request(messages, key_extra, response_format)
        if self.temperature > 0:  # sampling: the nucleus and the seed shape the reply too
            # repeats=N: the repeat's own seed (ragbench.repeats), set by LLMClient._request
            request["params"].update({"top_p": self.top_p, "seed": request["params"].get("seed", self.seed)
                                      if REPEAT in request["params"] else self.seed})
        return request

    def supports_response_format(self) -> bool:
        """A graded verdict's schema is decoded under its grammar (``ragbench.llm.local.grammar``), any
        other schema generated freely: a ``response_format`` is always accepted."""
        return True

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Prompt tokens of ``messages``, by the model's own tokenizer and chat template."""
        return self.local_model().count(messages)

    def room(self) -> int:
        """The most prompt tokens a request may have: the window less ``max_tokens``."""
        return self.local_model().context_window - self.max_new_tokens

    def overflow_message(self, tokens: int, window: int) -> str:
        return (
            f"{self._where()}: the prompt has {tokens:,} tokens, more than its window of {window:,} less "
            f"{self.role}.max_tokens={self.max_new_tokens}; fix: {self.role}.context_overflow="
            f"truncate_contexts (drops the lowest-ranked contexts), a smaller retrieval.topk or context cap, "
            f"or a model with a longer window"
        )

    def complete(
        self,
        messages: Sequence[Message],
        *,
        key_extra: Mapping[str, Any] | None = None,
        cache_if: Callable[[str], bool] | None = None,
        wave: Wave | None = None,
        **extra: Any,
    ) -> Completion:
        """The reply, from the cache or the model; outside a job's waves, in a wave of its own (one at
        a time: callers in several threads, ``calibrate``'s workers, take turns at the one model)."""
        if wave is not None or self.wave is not None:  # a job's wave (ragbench.pipeline)
            return super().complete(messages, key_extra=key_extra, cache_if=cache_if, wave=wave, **extra)
        with _SOLO_TURN:
            solo = Wave(default=False)
            return solo.run([lambda: super(LocalClient, self).complete(
                messages, key_extra=key_extra, cache_if=cache_if, wave=solo, **extra)])[0]

    def _body(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """A wave's line: the request itself rides along, so the runner keeps each reply in the reply
        cache the moment its batch is done (Ctrl-C then loses no finished batch)."""
        return {**super()._body(request), REQUEST: dict(request)}

    def keep_batch_reply(
        self, request: Mapping[str, Any], reply: BatchReply, cache_if: Callable[[str], bool] | None
    ) -> None:
        """Kept already, by the runner, when its batch was done."""
        key = reply_key("chat", request)
        with self._kept_lock:
            done = key in self._kept
        if not done:
            super().keep_batch_reply(request, reply, cache_if)

    def kept(self, request: Mapping[str, Any], reply: BatchReply, seconds: float) -> None:
        """Keeps a reply as its batch is done (the runner calls it); ``seconds``: the batch's generation,
        the request's latency."""
        super().keep_batch_reply(request, reply, None)
        with self._kept_lock:
            self._kept.add(reply_key("chat", request))
            self._latency[reply_key("chat", request)] = seconds

    def batch_runner(self, *, sleep: Callable[[float], None] = time.sleep) -> Any:
        """The runner answering a wave's requests with the local model."""
        return LocalRunner(self)

    def _from_batch(
        self, rounds: Wave, request: Mapping[str, Any], start: float
    ) -> Completion | None:
        reply = rounds.peek(reply_key("chat", request))
        if reply is not None and reply.text is None and reply.stopped is None:
            raise LLMContextError(str(reply.error))  # the runner's refusal: its own line and fix
        done = super()._from_batch(rounds, request, start)
        with self._kept_lock:
            seconds = self._latency.pop(reply_key("chat", request), None)
        if done is not None and seconds is not None and done.attempts:  # its batch's time, not the lookup's
            done = replace(done, latency_s=seconds)
        return done

    def preflight(self, *, kind: str = "chat") -> None:
        """Loads the model (weights checked, memory estimated) before the case loop; no request."""
        self.local_model()
