"""The litellm client: chat and embedding calls with retries, a concurrency bound, cached replies and usage.

The API key is read from the environment variable *named* by ``api_key_env`` at each call; the key
itself is never stored on the object, in the cache, in a log line or in an error message.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ragbench import repeats
from ragbench.cache.keys import reply_key
from ragbench.cache.mode import CacheMode
from ragbench.cache.replies import job_store
from ragbench.cache.store import StageCache
from ragbench.errors import BudgetExhaustedError, ConfigError, LLMError
from ragbench.llm import batch as batching
from ragbench.llm import deadline
from ragbench.llm.breaker import EndpointBreaker
from ragbench.llm.cache import ReplyCache
from ragbench.llm.deadline import DeadlinePassed, holding, within
from ragbench.llm.endpoint import LLMEndpoint
from ragbench.llm.errors import (
    LLMCircuitOpenError,
    LLMConnectionError,
    LLMReplyTooLargeError,
    LLMResponseError,
    LLMTimeoutError,
    classify,
    fix_for,
)
from ragbench.llm.loader import litellm
from ragbench.llm.local import is_local
from ragbench.llm.replies import Completion, Embeddings, EmptyReply, embedding_vectors
from ragbench.llm.retry import RetryPolicy
from ragbench.llm.slots import DEFAULT as DEFAULT_CONCURRENCY
from ragbench.llm.slots import endpoint_concurrency
from ragbench.llm.usage import (
    estimated_usage,
    max_cost_usd,
    usage_from_cache,
    usage_of,
    usage_sum,
    usage_to_dict,
)
from ragbench.llm.wave import Wave
from ragbench.redact import mask_secrets, register
from ragbench.session import LEDGER
from ragbench.types import Usage

log = logging.getLogger(__name__)
T = TypeVar("T")
Message = Mapping[str, str]
PREFLIGHT_PROMPT = "Reply with the single word OK."
PREFLIGHT = "preflight"  # the key_extra that marks the preflight probe
# repeats=N: the param naming the case repeat a request belongs to (judge.repeats' own is ``repeat``)
REPEAT = "case_repeat"
JOB_STORE = object()  # LLMClient(cache=...) default: the job's store (ragbench.cache.replies)


class LLMClient:
    """Calls one model through litellm. ``role`` names the config node in messages (llm, judge...)."""

    wave: Wave | None = None  # the job's wave its uncached requests join (ragbench.llm.wave.Wave.serving)

    def __new__(cls, *args: Any, **kwargs: Any) -> LLMClient:
        """A model string ``local`` or ``local/<reference>`` is served in process: a ``LocalClient``
        (ragbench.llm.local), wherever an LLMClient is built (judges, query rewriting, datasets generate)."""
        if cls is LLMClient and is_local(kwargs.get("model")):
            from ragbench.llm.local.client import (  # deferred: import cycle ragbench.llm.client -> ragbench.llm.local.client
                LocalClient,
            )

            return super().__new__(LocalClient)
        return super().__new__(cls)

    def __init__(self, *, cache: StageCache | None | object = JOB_STORE, **settings: Any) -> None:
        """``settings``: an ``LLMEndpoint``'s (ragbench.llm.endpoint; ``role`` names the config node in
        messages). ``cache``: the store replies are kept in (default: the job's, ``ragbench.cache.replies``;
        None: none); its ``cache.mode`` decides. Every reply is kept, budget or not, answers and verdicts too
        (the case runner also keeps them as stage records): a request already answered, in this sweep or
        an earlier one, is never sent again (unless ``cache.mode=refresh``). A judge prompt that does not
        show the contexts is the same request in every job of a top-k sweep. ``batch``: in a job's waves
        (``ragbench.llm.wave``) True sends this client's uncached chat requests as provider
        batches, False never, None as the job decides; ``batch_poll_s``: seconds between polls of a batch."""
        role = str(settings.pop("role", "llm"))
        ep = self.endpoint = LLMEndpoint.of(role, None, settings, max_tokens=None)
        if not ep.model or not isinstance(ep.model, str):
            raise ConfigError(f"{role}.model must be a litellm model string such as 'openai/gpt-4o-mini'")
        if ep.batch:
            batching.check_provider(ep.model, role)  # a provider without a batch API: one line, at build time
        self.auto_concurrency = ep.max_concurrency is None  # null: the endpoint's slots, asked at preflight
        max_concurrency = DEFAULT_CONCURRENCY if ep.max_concurrency is None else ep.max_concurrency
        self.model: str = ep.model
        self.api_base, self.api_key_env = ep.api_base, ep.api_key_env
        self.temperature, self.max_tokens, self.timeout = ep.temperature, ep.max_tokens, float(ep.timeout)
        self.retry = RetryPolicy(num_retries=ep.num_retries, backoff_s=ep.backoff_s)
        self.max_concurrency = max_concurrency
        self.role = role
        self.max_reply_chars = ep.max_reply_chars
        self.max_consecutive_failures = ep.max_consecutive_failures
        self.breaker = EndpointBreaker(ep.max_consecutive_failures)
        store = job_store() if cache is JOB_STORE else cache
        self.cache = ReplyCache(store, self._where()) if isinstance(store, StageCache) else None
        self.batch = ep.batch
        self.batch_poll_s = float(ep.batch_poll_s)
        self.batch_max_wait_s = float(ep.batch_max_wait_s)
        self._slots = threading.BoundedSemaphore(max_concurrency)
        # litellm (~5 s) is imported by the first request (the preflight, before the case loop), so a
        # config error answers in about a second; its import time never enters a reply's latency.

    def __repr__(self) -> str:
        return f"LLMClient(role={self.role!r}, model={self.model!r}, api_base={self.api_base!r})"

    # ------------------------------------------------------------------ public
    def complete(
        self,
        messages: Sequence[Message],
        *,
        key_extra: Mapping[str, Any] | None = None,
        cache_if: Callable[[str], bool] | None = None,
        response_format: Mapping[str, Any] | None = None,
        wave: Wave | None = None,
    ) -> Completion:
        """The reply to ``messages``; ``key_extra`` (e.g. a judge repeat index) enters the cache key.

        With ``cache_if``, only replies it accepts are stored or served from the cache. A judge does not
        use it: an unparseable verdict was paid for, so it is kept, and counted as failed each time it is
        read. ``response_format`` (an OpenAI ``json_schema`` response format) asks the endpoint for
        structured output; it is sent as given and enters the cache key. In a wave (``wave``, else the
        one the client serves) a request the reply cache misses waits for the wave's batch.
        """
        request = self._request(messages, key_extra, response_format)
        msgs, params = request["messages"], request["params"]
        cache = self.cache
        start = time.perf_counter()
        rounds = wave or self.wave
        if rounds is not None and PREFLIGHT not in params:  # a job's wave (ragbench.llm.wave)
            fed = self._from_batch(rounds, request, start)
            if fed is not None:
                return fed
        hit = cache.get("chat", request, lambda e: isinstance(e.get("text"), str) and (
            cache_if is None or cache_if(e["text"]))) if cache is not None else None
        if hit is None and rounds is not None and PREFLIGHT not in params and rounds.defers(self):
            key = reply_key("chat", request)
            rounds.wait(self, key, self._body(request), request, cache_if)  # until the wave's batch is in
            fed = self._from_batch(rounds, request, start)
            assert fed is not None  # the wave answered it (a reply or an error)
            return fed
        if hit is not None:
            LEDGER.record(self.role, usage_from_cache(hit))  # saved, not spent (ragbench.budget)
            return Completion(
                text=hit["text"],
                model=self.model,
                usage=usage_from_cache(hit),
                latency_s=time.perf_counter() - start,
                attempts=0,
            )
        start += _import_seconds()
        kwargs: dict[str, Any] = {"model": self.model, "messages": msgs, "temperature": self.temperature}
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        if response_format is not None:
            kwargs["response_format"] = dict(response_format)
        if REPEAT in params:  # repeats=N: each repeat samples with its own seed
            kwargs["seed"] = int(params["seed"])
        text, usage, attempts = self._call(
            self._booking_timeouts(lambda lib, extra: lib.completion(**kwargs, **extra),
                                   lambda: estimated_usage(model=self.model, messages=msgs)),
            lambda: max_cost_usd(model=self.model, messages=msgs, max_tokens=self.max_tokens),
            lambda response, extra: self._reply(response, extra.get("api_key")),
        )
        # every reply is kept, budget or not (a stage record's several replies too: each was paid for)
        if cache is not None and (cache_if is None or cache_if(text)):
            cache.put("chat", request, {"text": text, "model": self.model, **usage_to_dict(usage)})
        return Completion(
            text=text, model=self.model, usage=usage, latency_s=time.perf_counter() - start, attempts=attempts
        )

    def gather(self, calls: Sequence[tuple[Any, ...]]) -> None:
        """In a job's wave: defers each of ``calls`` ((messages, key_extra, cache_if[,
        response_format]): requests the caller is about to ``complete`` one after the other) that has no
        reply yet, so that they go in the same batch; outside a wave, nothing."""
        rounds = self.wave
        if rounds is None or not rounds.defers(self):
            return
        for messages, key_extra, cache_if, *rest in calls:
            request = self._request(messages, key_extra, rest[0] if rest else None)
            key = reply_key("chat", request)
            if rounds.answered(key) or (self.cache is not None and self.cache.get(
                    "chat", request, _usable(cache_if)) is not None):
                continue
            rounds.defer(self, key, self._body(request), request, cache_if)

    def batch_runner(self, *, sleep: Callable[[float], None] = time.sleep) -> batching.BatchRunner:
        """A runner sending this client's requests as one batch of its provider (``ragbench.llm.batch``)."""
        secret = os.environ.get(self.api_key_env) if self.api_key_env else None
        register(secret)
        store = self.cache.store if self.cache is not None else None
        return batching.BatchRunner(model=self.model, role=self.role, api_base=self.api_base, api_key=secret,
                                    store=store, poll_s=self.batch_poll_s, max_tokens=self.max_tokens, sleep=sleep,
                                    timeout=self.timeout, max_wait_s=self.batch_max_wait_s)

    def keep_batch_reply(self, request: Mapping[str, Any], reply: batching.BatchReply,
                         cache_if: Callable[[str], bool] | None) -> None:
        """Writes a batch's reply to the reply cache as the reply of a sent request would be kept (size
        bound, key masked, ``cache_if``): it was paid for, and a rerun is then a cache hit."""
        if self.cache is None or reply.text is None or len(reply.text) > self.max_reply_chars:
            return
        text = mask_secrets(reply.text)
        if cache_if is None or cache_if(text):
            self.cache.put("chat", request, {"text": text, "model": self.model, **usage_to_dict(reply.usage)})

    def _from_batch(self, rounds: Wave, request: Mapping[str, Any], start: float) -> Completion | None:
        """The reply a batch brought for ``request``, through the checks a sent request's reply gets (a
        request the batch failed raises as a failed call); None when no batch answered it."""
        taken = rounds.take(reply_key("chat", request))
        if taken is None:
            return None
        reply, first = taken
        if reply.stopped is not None:
            raise BudgetExhaustedError(reply.stopped)
        if reply.text is None:
            raise LLMResponseError(f"{self._where()}: batch {reply.batch_id} answered this request with an "
                                   f"error: {mask_secrets(str(reply.error))[:200]}; fix: rerun (the request is "
                                   f"sent again in a new batch) or set {self.role}.batch=false")
        if len(reply.text) > self.max_reply_chars:
            raise LLMReplyTooLargeError(
                f"{self._where()}: the reply has {len(reply.text):,} characters, more than "
                f"{self.role}.max_reply_chars={self.max_reply_chars:,}; it is not stored or judged; "
                f"fix: {self._fix(LLMReplyTooLargeError)}")
        usage = reply.usage if first else usage_from_cache(usage_to_dict(reply.usage))
        if not first:  # the same request of another case, sent once: served like a cache hit
            LEDGER.record(self.role, usage)
        return Completion(text=mask_secrets(reply.text), model=self.model, usage=usage,
                          latency_s=time.perf_counter() - start, attempts=1 if first else 0)

    def _body(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """A chat request's body as ``complete`` sends it, without the model: one line of a batch."""
        body: dict[str, Any] = {"messages": [dict(m) for m in request["messages"]],
                                "temperature": self.temperature}
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if request.get("response_format") is not None:
            body["response_format"] = dict(request["response_format"])
        if REPEAT in request["params"]:  # repeats=N: the repeat's seed (ragbench.repeats)
            body["seed"] = int(request["params"]["seed"])
        return body

    def cached(self, messages: Sequence[Message], *, key_extra: Mapping[str, Any] | None = None,
               response_format: Mapping[str, Any] | None = None) -> bool:
        """Whether ``complete(messages)`` would be served from the reply cache (``plan=true`` asks)."""
        if self.cache is None:
            return False
        return self.cache.get("chat", self._request(messages, key_extra, response_format),
                              lambda e: isinstance(e.get("text"), str)) is not None

    def supports_response_format(self) -> bool:
        """Whether litellm sends ``response_format`` to this model's provider (imports litellm)."""
        lib = litellm()
        try:
            supported = lib.get_supported_openai_params(model=self.model) or []
        except Exception:  # noqa: BLE001 - litellm raises several types for a provider it does not know
            return False
        return "response_format" in supported

    def embed(self, texts: Sequence[str], *, dimensions: int | None = None) -> Embeddings:
        """Vectors of ``texts`` (one request); cached like completions."""
        inputs = [str(t) for t in texts]
        request = {"model": self.model, "api_base": self.api_base, "input": inputs, "params": {"dimensions": dimensions}}
        start = time.perf_counter()
        hit = self.cache.get("embedding", request, lambda e: isinstance(e.get("vectors"), list) and len(
            e["vectors"]) == len(inputs)) if self.cache is not None else None
        if hit is not None:
            LEDGER.record(self.role, usage_from_cache(hit))
            return Embeddings(
                vectors=tuple(tuple(v) for v in hit["vectors"]),
                usage=usage_from_cache(hit),
                latency_s=time.perf_counter() - start,
            )
        start += _import_seconds()
        kwargs: dict[str, Any] = {"model": self.model, "input": inputs}
        if dimensions is not None:
            kwargs["dimensions"] = dimensions
        vectors, usage, _ = self._call(
            self._booking_timeouts(lambda lib, extra: lib.embedding(**kwargs, **extra),
                                   lambda: estimated_usage(model=self.model, texts=inputs)),
            lambda: max_cost_usd(model=self.model, texts=inputs),
            lambda response, _extra: embedding_vectors(response, len(inputs), self._where()),
            call_type="embedding",
        )
        if self.cache is not None:
            self.cache.put("embedding", request, {"vectors": [list(v) for v in vectors], "model": self.model,
                                                  **usage_to_dict(usage)})
        return Embeddings(vectors=vectors, usage=usage, latency_s=time.perf_counter() - start)

    def preflight(self, *, kind: str = "chat") -> None:
        """One tiny request before the case loop, through the cache and the retries like any other,
        so an unreachable endpoint, a wrong key or an unknown model fails the job once, up front.
        A cached preflight reply makes no request; a server named by ``api_base`` is then still checked
        for a listening socket (no HTTP request, nothing billed), so a server that is down fails the job
        before the ingest, not after it. ``cache.mode=read_only`` (a replay of cached answers) skips that
        check: a rerun served from the cache needs no server. ``max_concurrency: null`` asks the endpoint
        for its slots first (``follow_slots``)."""
        self.follow_slots()
        try:
            if kind == "embedding":
                self.embed(["ragbench preflight"])
            else:
                reply = self.complete([{"role": "user", "content": PREFLIGHT_PROMPT}], key_extra={PREFLIGHT: 1})
                if reply.attempts == 0:
                    self._check_listening()
        except LLMError as exc:
            raise type(exc)(f"preflight request before the case loop failed: {exc}") from None

    def follow_slots(self) -> int:
        """``max_concurrency: null``: the requests the endpoint serves at once (``ragbench.llm.slots``: llama.cpp's
        ``total_slots``, else the default), asked once, before any request; the bound in use otherwise."""
        if self.auto_concurrency:
            self.auto_concurrency = False
            self.max_concurrency = endpoint_concurrency(self.api_base, None, api_key_env=self.api_key_env)
            self._slots = threading.BoundedSemaphore(self.max_concurrency)
        return self.max_concurrency

    def _check_listening(self) -> None:
        """Raises LLMConnectionError when nothing listens at ``api_base`` (unless the cache is read-only)."""
        if not self.api_base or (self.cache is not None and self.cache.store.mode is CacheMode.READ_ONLY):
            return
        import socket
        from urllib.parse import urlsplit

        url = urlsplit(self.api_base)
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            with socket.create_connection((url.hostname or "localhost", port), timeout=min(self.timeout, 5.0)):
                return
        except OSError as exc:
            raise LLMConnectionError(
                f"{self._where()}: nothing answers at {url.hostname}:{port} ({exc}); "
                f"fix: start the server (its earlier replies are cached, but the cases not yet answered need it), "
                f"or replay the cache alone with cache.mode=read_only") from None

    # ------------------------------------------------------------------ internals
    def _request(self, messages: Sequence[Message], key_extra: Mapping[str, Any] | None,
                 response_format: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What identifies a chat request in the reply cache (never the key); a ``response_format``
        enters it only when one is asked for (the keys of plain requests stay as they were)."""
        msgs = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
        params: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        params.update(key_extra or {})
        if (rep := repeats.current()) is not None:  # repeats=N: the repeat's index and seed (ragbench.repeats)
            params.update({REPEAT: rep[0], "seed": rep[1]})
        request = {"model": self.model, "api_base": self.api_base, "messages": msgs, "params": params}
        if response_format is not None:
            request["response_format"] = json.loads(json.dumps(response_format, sort_keys=True))
        return request

    def _booking_timeouts(self, send: Callable[[Any, dict[str, Any]], T],
                          estimate: Callable[[], Usage]) -> Callable[[Any, dict[str, Any]], T]:
        """``send`` under ``timeout`` as a deadline for the whole attempt (``ragbench.llm.deadline``:
        litellm's own ``timeout`` bounds each read, so a server trickling its reply held a call for
        minutes), with an attempt that times out booked as attempted work: the server may still
        have processed it (a local server does), so its prompt tokens, estimated from the prompt, are
        booked as spent and counted in ``llm/<role>_timeouts`` (``Ledger.timed_out``). The attempt
        itself is one call, booked with the others."""
        def sending(lib: Any, extra: dict[str, Any]) -> T:
            try:
                try:
                    return within(self.timeout, lambda: send(lib, extra), name=f"ragbench-{self.role}")
                except DeadlinePassed:
                    raise LLMTimeoutError(f"no complete reply within {self.role}.timeout={self.timeout:g}s "
                                          "(a deadline for the whole attempt: connect, headers and body)") from None
            except Exception as exc:
                if _timed_out(exc):
                    LEDGER.timed_out(self.role, estimate())
                raise
        return sending

    def _where(self) -> str:
        at = f" at {self.api_base}" if self.api_base else " at the provider's default endpoint"
        return f"{self.role} model {self.model!r}{at}"

    def _fix(self, cls: type[LLMError]) -> str:
        return fix_for(cls).replace("llm.", f"{self.role}.")

    def _reply(self, response: Any, secret: str | None) -> str:
        """The text of one attempt's reply; the reply sink: bounded in size, the key masked."""
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise EmptyReply("the reply has no choices")
        content = getattr(getattr(choices[0], "message", None), "content", None)
        text = content if isinstance(content, str) else ""
        if len(text) > self.max_reply_chars:
            raise LLMReplyTooLargeError(
                f"{self._where()}: the reply has {len(text):,} characters, more than "
                f"{self.role}.max_reply_chars={self.max_reply_chars:,}; it is not stored or judged; "
                f"fix: {self._fix(LLMReplyTooLargeError)}"
            )
        # A server that echoes the key back must not get it into answers, caches or judge prompts.
        register(secret)
        return mask_secrets(text)

    def _call(
        self,
        send: Callable[[Any, dict[str, Any]], Any],
        bound: Callable[[], float],
        read: Callable[[Any, dict[str, Any]], T],
        *,
        call_type: str = "completion",
    ) -> tuple[T, Usage, int]:
        """One logical call: bounded by the semaphore, retried, failures mapped to LLMError classes.
        (what ``read`` makes of the reply, the usage of every attempt, attempts made). Each attempt is
        reserved in the ledger before it is sent (``bound()``: its maximum cost, under ``max_usd``) and
        settled with its usage when it returns, a reply ``read`` refuses included (it was paid for)."""
        import openai

        lib = litellm()
        secret = os.environ.get(self.api_key_env) if self.api_key_env else None
        extra: dict[str, Any] = {"timeout": self.timeout, "max_retries": 0}
        if self.api_base:
            extra["api_base"] = self.api_base
        if secret:
            extra["api_key"] = secret
        attempts = 0
        paid: list[Usage] = []

        def attempt() -> T:
            nonlocal attempts
            # budget.max_calls / max_usd / max_minutes: reserved before sending, nothing goes past them
            held = LEDGER.reserve(bound() if LEDGER.prices_requests else 0.0)
            attempts += 1
            usage = Usage()
            try:
                response = send(lib, extra)
                usage = usage_of(response, model=self.model, call_type=call_type)
                paid.append(usage)
            finally:
                LEDGER.settle(self.role, usage, held)  # an attempt with no reply: one call, no tokens
            return read(response, extra)

        def retryable(exc: BaseException) -> bool:  # a whole-attempt deadline passed: LLMTimeoutError
            return isinstance(exc, EmptyReply | LLMTimeoutError) or (
                isinstance(exc, openai.OpenAIError) and classify(exc)[1])

        def class_of(exc: BaseException) -> type[LLMError]:  # litellm calls a refused connection a 500
            if isinstance(exc, EmptyReply | LLMTimeoutError):
                return LLMResponseError if isinstance(exc, EmptyReply) else LLMTimeoutError
            return classify(exc)[0]

        def describe(exc: BaseException) -> str:
            return class_of(exc).__name__

        # an attempt abandoned at its deadline keeps its place until it ends (ragbench.llm.deadline)
        with holding(self._slots, self.max_concurrency, self.timeout):
            if self.breaker.message is not None:  # checked inside the slot: waiting threads send nothing
                raise LLMCircuitOpenError(self.breaker.message)
            LEDGER.admit()  # a stopped budget: not even a slot's worth of work
            try:
                result, _ = self.retry.run(attempt, retryable=retryable, what=self._where(), describe=describe)
            except (openai.OpenAIError, EmptyReply, LLMReplyTooLargeError, LLMTimeoutError) as exc:
                if isinstance(exc, LLMReplyTooLargeError):
                    raise
                cls = class_of(exc)
                register(secret)
                detail = mask_secrets(" ".join(str(exc).split()))[:200]  # one line; may carry the key
                opened = self.breaker.failure(cls, where=self._where(), detail=f"{type(exc).__name__}: {detail}",
                                              fix=self._fix(cls))
                if opened is not None:
                    raise LLMCircuitOpenError(opened) from None
                message = f"{self._where()}: {type(exc).__name__} after {attempts} attempt(s): {detail}"
                raise cls(f"{message}; fix: {self._fix(cls)}") from None  # the chained original could carry the key
        self.breaker.success()
        return result, usage_sum(paid), attempts


def _usable(cache_if: Callable[[str], bool] | None) -> Callable[[dict[str, Any]], bool]:
    """A cached chat reply's test: a text that ``cache_if`` (when given) accepts."""
    return lambda entry: isinstance(entry.get("text"), str) and (cache_if is None or cache_if(entry["text"]))


def _timed_out(exc: BaseException) -> bool:
    """Whether an attempt failed by timing out (the request left; the server may have processed it): a
    timeout of the client library, or the whole attempt's deadline (``ragbench.llm.deadline``) passed."""
    running = deadline.current()
    return (isinstance(exc, LLMTimeoutError | TimeoutError) or (running is not None and running.passed)
            or classify(exc)[0] is LLMTimeoutError)


def _import_seconds() -> float:
    """Imports litellm on the first request; the seconds that took, kept out of the reply's latency."""
    begin = time.perf_counter()
    litellm()
    return time.perf_counter() - begin
