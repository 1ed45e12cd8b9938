"""Calls an outside RAG system once per question with the LLM client's machinery: the concurrency bound,
retries with backoff (``RetryPolicy``), the endpoint circuit breaker, the budget's reservations (each
attempt reserved and settled in the ledger under the role ``system``), the job's reply cache (keyed by the
system's identity, its ``system.params``, the question and any contexts handed to it) and secret masking.
A failure is one of the LLM failure classes, so a failed case is counted, scored 0 and retried on a rerun
exactly as an LLM failure is."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragbench import repeats
from ragbench.cache.replies import job_store
from ragbench.cache.store import StageCache
from ragbench.errors import ConfigError, LLMError
from ragbench.jsonio import NestedTooDeep, loads_bounded
from ragbench.llm.breaker import EndpointBreaker
from ragbench.llm.cache import ReplyCache
from ragbench.llm.deadline import DeadlinePassed, within
from ragbench.llm.endpoint import LLMEndpoint
from ragbench.llm.errors import (
    LLMCircuitOpenError,
    LLMConnectionError,
    LLMRateLimitError,
    LLMReplyTooLargeError,
    LLMResponseError,
    LLMServerError,
    LLMTimeoutError,
)
from ragbench.llm.retry import RetryPolicy
from ragbench.redact import mask_secrets
from ragbench.session import LEDGER
from ragbench.systems.records import RecordError, SystemRecord, parse_record
from ragbench.types import Context, Query, Usage

ROLE = "system"  # the ledger's role: llm/system_calls, tokens/system_*, cost/system_usd
KIND = "system"  # the reply cache's kind
RETRYABLE = (LLMTimeoutError, LLMConnectionError, LLMServerError, LLMRateLimitError, LLMResponseError)
MAX_RECORD_CHARS = 16_000_000  # characters of one reply (bytes of an HTTP body): system.max_record_chars
MAX_DEPTH = 100  # nesting of a reply's arrays and objects (a record nests 4 levels)


class SystemFunctionError(LLMServerError):
    """The user's callable raised (retried like a 5xx: its own model call may have failed for a moment)."""


_FIXES = {
    LLMTimeoutError: "raise system.timeout (the whole call: connect, headers and body), or check that the "
                     "system is not stalled",
    LLMReplyTooLargeError: "return passages, not documents, or raise system.max_record_chars",
    LLMConnectionError: "check system.url and that the service is running",
    LLMServerError: "see the system's own error above; raise system.num_retries for transient failures",
    LLMResponseError: "return one JSON record {qid?, answer, contexts[{id?, text, score?}], ...} per question",
}


def check_limits(timeout: Any, max_record_chars: Any) -> None:
    """``system.timeout`` and ``system.max_record_chars`` as one-line ConfigErrors naming the user's key."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < float("inf"):
        raise ConfigError(f"system.timeout must be a number of seconds > 0 (the whole call), got {timeout!r}; "
                          "fix: e.g. system.timeout=60")
    if isinstance(max_record_chars, bool) or not isinstance(max_record_chars, int) or max_record_chars < 1:
        raise ConfigError(f"system.max_record_chars must be an integer >= 1, got {max_record_chars!r}; fix: "
                          f"e.g. system.max_record_chars={MAX_RECORD_CHARS} (the default)")


def system_endpoint(endpoint: LLMEndpoint | None, settings: Mapping[str, Any]) -> LLMEndpoint:
    """A system's endpoint: ``endpoint`` with ``settings`` (the flat ``system.*`` keys: timeout,
    num_retries, backoff_s, max_concurrency, max_consecutive_failures, api_key_env) over it."""
    return LLMEndpoint.of(ROLE, endpoint, settings, num_retries=2, max_concurrency=4)


def fix_for(cls: type[LLMError]) -> str:
    return next((fix for c, fix in _FIXES.items() if issubclass(cls, c)), "see the error above")


def payload(query: Query, contexts: Sequence[Context] | None, params: Mapping[str, Any]) -> dict[str, Any]:
    """What a system is asked for one question: qid, question, the ragbench contexts when ragbench
    retrieved (generation half), and ``system.params``; for a conversation's turn also its ``conversation``
    id, ``turn`` index and ``history`` (the earlier turns, oldest first: ``{question, answer}``, the answer
    the data gives)."""
    out: dict[str, Any] = {"qid": query.qid, "question": query.text, "params": dict(params)}
    if query.conversation is not None:
        out.update(conversation=query.conversation, turn=query.turn,
                   history=[{"question": t.text, "answer": t.answer} for t in query.history])
    if contexts is not None:
        out["contexts"] = [{"id": c.chunk_id, "title": c.title, "text": c.text} for c in contexts]
    return out


class SystemClient:
    """One system's calls: ``call(ask, send)`` returns the record ``send`` produced (or the cached one)."""

    def __init__(self, endpoint: LLMEndpoint, *, where: str, cached: bool = True,
                 max_record_chars: int = MAX_RECORD_CHARS) -> None:
        """``endpoint``: the system's (``system_endpoint``): timeout, retries, bound, circuit breaker."""
        max_concurrency = endpoint.max_concurrency
        if max_concurrency is None:  # a system has no slots to ask
            raise ConfigError("system.max_concurrency must be >= 1, got null; fix: e.g. system.max_concurrency=4")
        check_limits(endpoint.timeout, max_record_chars)
        self.endpoint = endpoint
        self.where = where
        self.timeout = float(endpoint.timeout)
        self.max_record_chars = max_record_chars
        self.retry = RetryPolicy(num_retries=endpoint.num_retries, backoff_s=endpoint.backoff_s)
        self.breaker = EndpointBreaker(endpoint.max_consecutive_failures)
        self.max_concurrency = max_concurrency
        store = job_store() if cached else None
        self.cache = ReplyCache(store, where) if isinstance(store, StageCache) else None
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self.calls = 0  # attempts sent by this client (tests, logs)

    def call(self, ask: Mapping[str, Any], identity: str, send: Callable[[Mapping[str, Any], float], Any]) -> SystemRecord:
        """The record for ``ask`` (``payload``): from the reply cache, else ``send(ask, timeout)`` (a JSON
        object, or a JSON string) under the bound, retried; a failure raises an LLM failure class.
        ``system.timeout`` is a deadline for each whole attempt (``ragbench.llm.deadline``): ``send``
        runs in a worker thread and the attempt fails with LLMTimeoutError when it passes."""
        qid = str(ask["qid"])
        request: dict[str, Any] = {"model": identity, "api_base": None, "ask": dict(ask)}
        if (rep := repeats.current()) is not None:  # repeats=N: each repeat asks again (ragbench.repeats)
            request["repeat"] = rep[0]
        hit = self.cache.get(KIND, request, lambda e: isinstance(e.get("record"), dict)) if self.cache else None
        if hit is not None:
            try:
                record = parse_record(hit["record"], f"{self.where} (cached reply)", qid=qid)
            except RecordError:
                record = None  # a reply the record schema no longer accepts: asked again
            if record is not None:  # served: booked as saved, not spent
                LEDGER.record(ROLE, Usage(prompt_tokens=record.usage.prompt_tokens,
                                          completion_tokens=record.usage.completion_tokens,
                                          cost_usd=record.usage.cost_usd, cached=True))
                return record

        def attempt() -> SystemRecord:
            held = LEDGER.reserve(0.0)
            usage = Usage()
            self.calls += 1
            try:
                try:
                    reply = within(self.timeout, lambda: send(ask, self.timeout), name=f"ragbench-system-{qid}")
                except DeadlinePassed:
                    raise LLMTimeoutError(f"no complete reply within system.timeout={self.timeout:g}s "
                                          "(a deadline for the whole call)") from None
                record = _record(reply, self.where, qid, self.max_record_chars)
                usage = record.usage
            finally:
                LEDGER.settle(ROLE, usage, held)
            return record

        with self._slots:
            if self.breaker.message is not None:  # checked inside the slot: waiting threads send nothing
                raise LLMCircuitOpenError(self.breaker.message)
            LEDGER.admit()
            try:
                fresh, attempts = self.retry.run(attempt, retryable=_retryable, what=self.where)
            except LLMError as exc:
                if isinstance(exc, LLMCircuitOpenError):
                    raise
                cls = type(exc)
                detail = mask_secrets(" ".join(str(exc).split()))[:300]
                opened = self.breaker.failure(cls, where=self.where, detail=f"{cls.__name__}: {detail}",
                                              fix=fix_for(cls))
                if opened is not None:
                    raise LLMCircuitOpenError(opened) from None
                raise cls(f"{self.where}, question {qid!r}: {detail}; fix: {fix_for(cls)}") from None
        self.breaker.success()
        if self.cache is not None:
            self.cache.put(KIND, request, {"record": fresh.to_json(), "attempts": attempts})
        return fresh


def _retryable(exc: BaseException) -> bool:
    """A transient failure; a reply over the size bound is not (the same question gets the same reply)."""
    return isinstance(exc, RETRYABLE) and not isinstance(exc, LLMReplyTooLargeError)


def _too_large(where: str, limit: int) -> LLMReplyTooLargeError:
    return LLMReplyTooLargeError(f"{where}: the reply is longer than system.max_record_chars={limit:,}")


def _check_size(obj: Any, where: str, limit: int) -> None:
    """A reply object (a Python system's) refused when its strings and keys hold more than ``limit``
    characters, or when it nests deeper than ``MAX_DEPTH``: walked without recursion, stopping at the bound."""
    size = 0
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str | bytes):
            size += len(item)
        elif isinstance(item, dict | list | tuple):
            if depth >= MAX_DEPTH:
                raise LLMResponseError(f"{where}: the reply is nested too deep (more than {MAX_DEPTH} levels of "
                                       "lists and dicts); fix: return one record {answer, contexts[...]}")
            size += len(item)
            values = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((v, depth + 1) for v in values)
        else:
            size += 8
        if size > limit:
            raise _too_large(where, limit)


def _record(reply: Any, where: str, qid: str, limit: int = MAX_RECORD_CHARS) -> SystemRecord:
    """The reply as a record, its strings masked; garbage is an LLMResponseError (retried, then the case
    fails); a reply over ``limit`` characters is an LLMReplyTooLargeError (the case fails at once)."""
    if isinstance(reply, str | bytes):
        if len(reply) > limit:
            raise _too_large(where, limit)
        try:
            reply = loads_bounded(reply, max_depth=MAX_DEPTH, where=f"{where}: the reply")
        except NestedTooDeep as exc:
            raise LLMResponseError(str(exc)) from None
        except (ValueError, UnicodeDecodeError) as exc:  # json.JSONDecodeError is a ValueError
            raise LLMResponseError(f"{where}: the reply is not JSON ({exc})") from None
    else:
        _check_size(reply, where, limit)
    reply = _masked(reply)
    try:
        return parse_record(reply, where, qid=qid)
    except RecordError as exc:
        raise LLMResponseError(str(exc)) from None


def _masked(obj: Any) -> Any:
    """Every string of a reply with registered secrets masked (a system that echoes a key back)."""
    if isinstance(obj, str):
        return mask_secrets(obj)
    if isinstance(obj, dict):
        return {k: _masked(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_masked(v) for v in obj]
    return obj
