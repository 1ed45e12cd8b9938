"""Calls an outside RAG system once per question with the LLM client's machinery: the concurrency bound,
retries with backoff (``RetryPolicy``), the endpoint circuit breaker, the budget's reservations (each
attempt reserved and settled in the ledger under the role ``system``), the job's reply cache (keyed by the
system's identity, its ``system.params``, the question and any contexts handed to it) and secret masking.
A failure is one of the LLM failure classes, so a failed case is counted, scored 0 and retried on a rerun
exactly as an LLM failure is."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragbench.budget import LEDGER
from ragbench.cache.replies import job_store
from ragbench.cache.store import StageCache
from ragbench.errors import ConfigError, LLMError
from ragbench.llm.breaker import EndpointBreaker
from ragbench.llm.cache import ReplyCache
from ragbench.llm.errors import (
    LLMCircuitOpenError,
    LLMConnectionError,
    LLMRateLimitError,
    LLMResponseError,
    LLMServerError,
    LLMTimeoutError,
)
from ragbench.llm.retry import RetryPolicy
from ragbench.redact import mask_secrets
from ragbench.systems.records import RecordError, SystemRecord, parse_record
from ragbench.types import Context, Query, Usage

ROLE = "system"  # the ledger's role: llm/system_calls, tokens/system_*, cost/system_usd
KIND = "system"  # the reply cache's kind
RETRYABLE = (LLMTimeoutError, LLMConnectionError, LLMServerError, LLMRateLimitError, LLMResponseError)


class SystemFunctionError(LLMServerError):
    """The user's callable raised (retried like a 5xx: its own model call may have failed for a moment)."""


_FIXES = {
    LLMTimeoutError: "raise system.timeout, or check that the system is not stalled",
    LLMConnectionError: "check system.url and that the service is running",
    LLMServerError: "see the system's own error above; raise system.num_retries for transient failures",
    LLMResponseError: "return one JSON record {qid?, answer, contexts[{id?, text, score?}], ...} per question",
}


def fix_for(cls: type[LLMError]) -> str:
    return next((fix for c, fix in _FIXES.items() if issubclass(cls, c)), "see the error above")


def payload(query: Query, contexts: Sequence[Context] | None, params: Mapping[str, Any]) -> dict[str, Any]:
    """What a system is asked for one question: qid, question, the ragbench contexts when ragbench
    retrieved (generation half), and ``system.params``."""
    out: dict[str, Any] = {"qid": query.qid, "question": query.text, "params": dict(params)}
    if contexts is not None:
        out["contexts"] = [{"id": c.chunk_id, "title": c.title, "text": c.text} for c in contexts]
    return out


class SystemClient:
    """One system's calls: ``call(ask, send)`` returns the record ``send`` produced (or the cached one)."""

    def __init__(self, *, where: str, timeout: float = 60.0, num_retries: int = 2, backoff_s: float = 1.0,
                 max_concurrency: int = 4, max_consecutive_failures: int = 5, cached: bool = True) -> None:
        if max_concurrency < 1:
            raise ConfigError(f"system.max_concurrency must be >= 1, got {max_concurrency}")
        if timeout <= 0:
            raise ConfigError(f"system.timeout must be > 0 seconds, got {timeout}")
        self.where = where
        self.timeout = float(timeout)
        self.retry = RetryPolicy(num_retries=num_retries, backoff_s=backoff_s)
        self.breaker = EndpointBreaker(max_consecutive_failures)
        self.max_concurrency = max_concurrency
        store = job_store() if cached else None
        self.cache = ReplyCache(store, where) if isinstance(store, StageCache) else None
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self.calls = 0  # attempts sent by this client (tests, logs)

    def call(self, ask: Mapping[str, Any], identity: str, send: Callable[[Mapping[str, Any], float], Any]) -> SystemRecord:
        """The record for ``ask`` (``payload``): from the reply cache, else ``send(ask, timeout)`` (a JSON
        object, or a JSON string) under the bound, retried; a failure raises an LLM failure class."""
        qid = str(ask["qid"])
        request = {"model": identity, "api_base": None, "ask": dict(ask)}
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
                reply = send(ask, self.timeout)
                record = _record(reply, self.where, qid)
                usage = record.usage
            finally:
                LEDGER.settle(ROLE, usage, held)
            return record

        with self._slots:
            if self.breaker.message is not None:  # checked inside the slot: waiting threads send nothing
                raise LLMCircuitOpenError(self.breaker.message)
            LEDGER.admit()
            try:
                fresh, attempts = self.retry.run(attempt, retryable=lambda e: isinstance(e, RETRYABLE),
                                                  what=self.where)
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


def _record(reply: Any, where: str, qid: str) -> SystemRecord:
    """The reply as a record, its strings masked; garbage is an LLMResponseError (retried, then the case fails)."""
    if isinstance(reply, str | bytes):
        try:
            reply = json.loads(reply)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise LLMResponseError(f"{where}: the reply is not JSON ({exc})") from None
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
