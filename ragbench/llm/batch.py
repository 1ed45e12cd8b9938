"""Provider batch APIs through litellm (``llm.batch=true``): chat requests sent as one batch, polled with
progress, resumable, and booked at the batch price.

A batch is kept in the stage cache (stage ``llm_batches``) under the key of its request set (model,
endpoint, every request's custom id and body) as soon as the provider has accepted it: a run that ends
(kill -9 included) between submission and completion is resumed by the next run with the same requests,
which polls the recorded batch instead of sending it again. Cost: litellm's batch prices
(``input_cost_per_token_batches`` / ``output_cost_per_token_batches``) where its cost map has them, else
``BATCH_DISCOUNT`` (0.5, the discount OpenAI, Anthropic, Mistral and Vertex AI publish) times list price.
A new batch is reserved against the budget before it is submitted (``ragbench.budget``); a resumed one
was paid for by the run that submitted it, and is only booked.

``BatchRunner`` is one of the two ways a job's wave of requests is answered (``ragbench.llm.wave``; the
other is the local model, ``ragbench.llm.local.runner``).
"""

from __future__ import annotations

import io
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ragbench import interrupts
from ragbench.cache.store import StageCache, make_key
from ragbench.errors import BudgetExhaustedError, ConfigError, LLMError
from ragbench.llm.deadline import DeadlinePassed, within
from ragbench.llm.loader import litellm
from ragbench.llm.usage import max_cost_usd
from ragbench.redact import mask_secrets
from ragbench.session import LEDGER
from ragbench.types import Usage

log = logging.getLogger(__name__)

STAGE = "llm_batches"
ENDPOINT = "/v1/chat/completions"
BATCH_DISCOUNT = 0.5
# providers litellm's create_batch / retrieve_batch / file_content serve (litellm/batches/main.py)
BATCH_PROVIDERS = ("openai", "azure", "vertex_ai", "bedrock", "hosted_vllm", "mistral", "xai")
DONE = {"completed"}
FAILED = {"failed", "expired", "cancelled", "cancelling"}
LOG_EVERY_S = 60.0  # a poll is logged when the batch's state changes, else at most this often
MAX_POLL_ERRORS = 5  # polls failing in a row (the provider unreachable) before the run gives up (resumable)
MAX_WAIT_S = 24 * 3600.0  # <role>.batch_max_wait_s: how long one run polls a batch (the provider's window)
_CUSTOM_ID = re.compile(r'"custom_id"\s*:\s*"([^"\\]{1,200})"')  # in a line that is not valid JSON


def provider_of(model: str) -> str:
    """litellm's provider prefix of ``model`` (``openai/gpt-4o-mini`` -> openai; no prefix: openai)."""
    return model.split("/", 1)[0] if "/" in model else "openai"


def check_provider(model: str, role: str, switch: str | None = None) -> str:
    """The provider of ``model``, or a one-line ConfigError for a provider without a batch API.
    ``switch``: the setting that turned batching on (default ``<role>.batch``)."""
    provider = provider_of(model)
    switch = switch or f"{role}.batch"
    if provider not in BATCH_PROVIDERS:
        raise ConfigError(f"{switch}=true: {role}.model={model!r} is served by {provider!r}, which has no "
                          f"batch API through litellm (batch providers: {', '.join(BATCH_PROVIDERS)}); "
                          f"fix: set {switch}=false")
    return provider


@dataclass(frozen=True)
class BatchReply:
    """One request's reply from a batch: its text (None when the provider failed it) and usage."""

    text: str | None
    usage: Usage
    error: str | None = None
    stopped: str | None = None  # the budget message when the request was not sent (the budget is spent)
    batch_id: str | None = None


def batch_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """The cost of one batched request: litellm's batch prices, else BATCH_DISCOUNT x list price."""
    lib = litellm()
    unpriced = (lib.exceptions.ModelNotMappedError, ValueError, KeyError, TypeError, AttributeError)
    try:
        info = lib.get_model_info(model)
    except unpriced:
        info = {}
    pin, pout = info.get("input_cost_per_token_batches"), info.get("output_cost_per_token_batches")
    if pin is not None and pout is not None:
        return float(pin) * prompt_tokens + float(pout) * completion_tokens
    try:
        a, b = lib.cost_per_token(model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    except unpriced:  # unpriced: booked as 0, like a normal call (ragbench.llm.usage)
        return 0.0
    return BATCH_DISCOUNT * (float(a) + float(b))


class BatchRunner:
    """Sends a set of chat requests as one batch of ``model``'s provider and returns the replies."""

    def __init__(self, *, model: str, role: str = "llm", api_base: str | None = None, api_key: str | None = None,
                 store: StageCache | None = None, poll_s: float = 10.0, max_wait_s: float = MAX_WAIT_S,
                 max_tokens: int | None = None, sleep: Callable[[float], None] = time.sleep,
                 timeout: float = 60.0) -> None:
        """``timeout``: a deadline for each poll request (``<role>.timeout``, the whole request);
        ``max_wait_s``: how long one run polls a batch before it gives up, resumable
        (``<role>.batch_max_wait_s``)."""
        self.model = model
        self.role = role
        self.provider = check_provider(model, role)
        self.api_base = api_base
        self.api_key = api_key
        self.store = store
        self.poll_s = poll_s
        self.max_wait_s = max_wait_s
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.sleep = sleep
        self.batch_id: str | None = None
        self.resumed = False

    def _kwargs(self) -> dict[str, Any]:
        out: dict[str, Any] = {"custom_llm_provider": self.provider}
        if self.api_base:
            out["api_base"] = self.api_base
        if self.api_key:
            out["api_key"] = self.api_key
        return out

    def key(self, bodies: Mapping[str, Mapping[str, Any]]) -> str:
        """The request set's key: the same requests, the same batch (resume)."""
        return make_key({"stage": STAGE, "model": self.model, "api_base": self.api_base, "endpoint": ENDPOINT,
                         "requests": {cid: dict(b) for cid, b in sorted(bodies.items())}})

    def run(self, bodies: Mapping[str, Mapping[str, Any]]) -> dict[str, BatchReply]:
        """{custom id: reply} for ``bodies`` ({custom id: chat request body without ``model``}).

        A new batch is reserved against the budget before it is submitted (its maximum cost at the batch
        price, one call per request); requests past ``budget.max_calls`` are not sent (their replies carry
        ``stopped``). A batch recorded by an earlier run for the same requests is polled, not submitted."""
        if not bodies:
            return {}
        lib = litellm()
        key = self.key(bodies)
        record = self._recorded(key)
        holds: list[float] | None = None
        stopped: str | None = None
        sent = dict(bodies)
        if record is None:
            holds, stopped = self._reserve(bodies)
            if stopped is not None:  # the budget admits only the first len(holds) requests
                sent = dict(list(bodies.items())[: len(holds)])
                if not sent:
                    return {cid: BatchReply(None, Usage(), stopped, stopped=stopped) for cid in bodies}
                key = self.key(sent)
                record = self._recorded(key)
        if record is not None:
            self.batch_id, self.resumed = record, True
            log.info("%s: resuming batch %s (%d requests), submitted by an earlier run", self.role,
                     self.batch_id, len(sent))
        else:
            try:
                self.batch_id = self._submit(lib, sent, key)
            except BaseException:
                for hold in holds or ():
                    LEDGER.settle(self.role, Usage(), hold)
                raise
        replies: dict[str, BatchReply] = {}
        try:
            replies = self._results(lib, self._wait(lib, key))
        finally:  # every request booked at its batch cost: settled (this run reserved it) or recorded
            for i, cid in enumerate(sent):
                reply = replies.get(cid)
                usage = reply.usage if reply else Usage()
                if holds is not None:
                    LEDGER.settle(self.role, usage, holds[i])
                else:  # resumed: submitted (and reserved) by the run that ended; booked here, once
                    LEDGER.record(self.role, usage)
        out: dict[str, BatchReply] = {}
        for cid in bodies:
            if cid not in sent:
                out[cid] = BatchReply(None, Usage(), stopped, stopped=stopped)
            elif cid in replies:
                out[cid] = replace(replies[cid], batch_id=self.batch_id)
            else:
                out[cid] = BatchReply(None, Usage(), "no result line for this request in the batch output",
                                      batch_id=self.batch_id)
        failed = sum(out[cid].text is None for cid in sent)
        if failed:
            self._forget(key, f"completed, {failed} of {len(sent)} requests without a reply")
        return out

    def _forget(self, key: str, status: str) -> None:
        """Unrecords the batch of ``key``: a rerun does not resume it but submits what has no reply yet
        (the replies it brought are in the reply cache, so only the failed requests go, in a new batch)."""
        if self.store is not None:
            self.store.put_record(STAGE, key, {"stage": STAGE, "model": self.model},
                                  {"failed_batch_id": self.batch_id, "status": status})

    def _recorded(self, key: str) -> str | None:
        """The id of the batch an earlier run submitted for this request set (kept in the stage cache)."""
        record = self.store.get_record(STAGE, key) if self.store is not None else None
        if isinstance(record, dict) and isinstance(record.get("batch_id"), str):
            return str(record["batch_id"])
        return None

    def _reserve(self, bodies: Mapping[str, Mapping[str, Any]]) -> tuple[list[float], str | None]:
        """Holds one budget call per request (the first also holds the whole batch's maximum cost at the
        batch price, under ``max_usd``); (the holds, the budget message when not every request fits)."""
        usd = sum(BATCH_DISCOUNT * max_cost_usd(model=self.model, messages=b.get("messages", []),
                                                max_tokens=self.max_tokens)
                  for b in bodies.values()) if LEDGER.prices_requests else 0.0
        holds: list[float] = []
        for i in range(len(bodies)):
            try:
                holds.append(LEDGER.reserve(usd if i == 0 else 0.0))
            except BudgetExhaustedError as exc:
                return holds, str(exc)
        return holds, None

    def _submit(self, lib: Any, bodies: Mapping[str, Mapping[str, Any]], key: str) -> str:
        name = self.model.split("/", 1)[-1]
        lines = [json.dumps({"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": {"model": name, **body}})
                 for cid, body in bodies.items()]
        data = io.BytesIO(("\n".join(lines) + "\n").encode())
        data.name = "ragbench-batch.jsonl"
        try:
            uploaded = lib.create_file(file=data, purpose="batch", **self._kwargs())
            batch = lib.create_batch(completion_window="24h", endpoint=ENDPOINT, input_file_id=uploaded.id,
                                     **self._kwargs())
        except Exception as exc:  # noqa: BLE001 - litellm/openai errors of every kind: one line, key masked
            raise LLMError(f"{self.role} batch of {len(bodies)} requests to {self.model!r}: submission failed: "
                           f"{type(exc).__name__}: {self._detail(exc)}; fix: check {self.role}.api_base and the "
                           f"key, or set {self.role}.batch=false") from None
        if self.store is not None:  # recorded before any wait: a killed run resumes this batch
            self.store.put_record(STAGE, key, {"stage": STAGE, "model": self.model, "requests": len(bodies)},
                                  {"batch_id": batch.id, "input_file_id": uploaded.id, "submitted": time.time()})
        log.info("%s: submitted batch %s of %d requests to %s", self.role, batch.id, len(bodies), self.provider)
        return str(batch.id)

    def _detail(self, exc: BaseException) -> str:
        return mask_secrets(" ".join(str(exc).split()))[:200]

    def _wait(self, lib: Any, key: str) -> Any:
        start = time.monotonic()
        shown: tuple[Any, ...] | None = None
        last = 0.0
        errors = 0
        while True:
            interrupts.check()  # a safe point: the batch id is kept, a rerun polls it
            try:  # each poll is one request under a deadline (a provider trickling its reply cannot hold it)
                batch = within(self.timeout, lambda: lib.retrieve_batch(batch_id=self.batch_id, **self._kwargs()),
                               name=f"ragbench-{self.role}-batch-poll")
                errors = 0
            except Exception as exc:  # noqa: BLE001 - the provider unreachable for a moment: poll again
                errors += 1
                what = (f"no complete reply within {self.role}.timeout={self.timeout:g}s"
                        if isinstance(exc, DeadlinePassed) else f"{type(exc).__name__}: {self._detail(exc)}")
                if errors >= MAX_POLL_ERRORS:
                    raise LLMError(f"{self.role} batch {self.batch_id}: {errors} polls failed in a row "
                                   f"({what}); fix: rerun when the provider answers: the batch id is kept, "
                                   "the rerun polls it") from None
                if time.monotonic() - start > self.max_wait_s:
                    raise self._too_long("unanswered") from None
                self.sleep(self.poll_s)
                continue
            counts = getattr(batch, "request_counts", None)
            done, total = getattr(counts, "completed", 0) or 0, getattr(counts, "total", 0) or 0
            now = time.monotonic()
            if (batch.status, done) != shown or now - last >= LOG_EVERY_S or batch.status in DONE:
                log.info("%s: batch %s %s, %d/%d requests done (%.0f s)", self.role, self.batch_id,
                         batch.status, done, total, now - start)
                shown, last = (batch.status, done), now
            if batch.status in DONE:
                return batch
            if batch.status in FAILED:
                self._forget(key, batch.status)  # the next run submits the requests again
                raise LLMError(f"{self.role} batch {self.batch_id} of {self.model!r} ended {batch.status}: "
                               f"{getattr(batch, 'errors', None)}; fix: rerun (a new batch is submitted) or set "
                               f"{self.role}.batch=false")
            if now - start > self.max_wait_s:
                raise self._too_long(str(batch.status))
            self.sleep(self.poll_s)

    def _too_long(self, status: str) -> LLMError:
        return LLMError(f"{self.role} batch {self.batch_id} is still {status} after {self.role}.batch_max_wait_s="
                        f"{self.max_wait_s:g} s; fix: rerun later (the batch id is kept, the rerun polls it) or "
                        f"raise {self.role}.batch_max_wait_s")

    def _results(self, lib: Any, batch: Any) -> dict[str, BatchReply]:
        """{custom id: reply} from the batch's output and error files. A line that cannot be read fails
        only its own request (found by its custom id where the line still shows it; a request with no
        readable line gets "no result line"), never the whole batch."""
        out: dict[str, BatchReply] = {}
        unreadable = 0
        for file_id in (batch.output_file_id, getattr(batch, "error_file_id", None)):
            if not file_id:
                continue
            content = lib.file_content(file_id=file_id, **self._kwargs())
            raw = content.content if hasattr(content, "content") else content
            text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
            for n, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                cid, reply = self._line(line)
                if cid is None:
                    unreadable += 1
                    log.warning("%s: batch %s: line %d of %s names no request: %r", self.role,
                                self.batch_id, n, file_id, mask_secrets(line[:60]))
                elif reply.text is not None or cid not in out:  # a reply beats an error line for it
                    out[cid] = reply
        if unreadable:
            log.warning("%s: batch %s: %d unreadable result lines; their requests fail (a rerun sends them "
                        "again in a new batch)", self.role, self.batch_id, unreadable)
        return out

    def _line(self, line: str) -> tuple[str | None, BatchReply]:
        """(custom id, reply) of one result line; a malformed line is a failed reply of the request whose
        custom id it shows, or (None, ...) when it shows none."""
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError; brackets nested too deep
            match = _CUSTOM_ID.search(line)
            why = "nested too deep" if isinstance(exc, RecursionError) else str(exc)
            failed = BatchReply(None, Usage(), f"malformed result line ({why})")
            return (match.group(1) if match else None), failed
        cid = row.get("custom_id") if isinstance(row, dict) else None
        if not isinstance(cid, str):
            return None, BatchReply(None, Usage(), "result line without a custom_id")
        try:
            return cid, self._reply(row)
        except (AttributeError, TypeError, ValueError, IndexError, KeyError) as exc:
            why = f"malformed result line ({type(exc).__name__}: {exc})"[:200]
            return cid, BatchReply(None, Usage(), why)

    def _reply(self, row: Mapping[str, Any]) -> BatchReply:
        response = row.get("response") or {}
        body = response.get("body") or {}
        if row.get("error") or response.get("status_code") != 200:
            return BatchReply(None, Usage(), str(row.get("error") or body.get("error") or response.get("status_code")))
        usage = body.get("usage") or {}
        p, c = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        choices = body.get("choices") or [{}]
        text = (choices[0].get("message") or {}).get("content")
        return BatchReply(text if isinstance(text, str) else None,
                          Usage(prompt_tokens=p, completion_tokens=c, cost_usd=batch_cost(self.model, p, c)),
                          None if isinstance(text, str) else "the result line has no reply text")
