"""Provider batch APIs through litellm (``llm.batch=true``): chat requests sent as one batch, polled with
progress, resumable, and booked at the batch price.

A batch is kept in the stage cache (stage ``llm_batches``) under the key of its request set (model,
endpoint, every request's custom id and body) as soon as the provider has accepted it: a run that ends
(kill -9 included) between submission and completion is resumed by the next run with the same requests,
which polls the recorded batch instead of sending it again. Cost: litellm's batch prices
(``input_cost_per_token_batches`` / ``output_cost_per_token_batches``) where its cost map has them, else
``BATCH_DISCOUNT`` (0.5, the discount OpenAI, Anthropic, Mistral and Vertex AI publish) times list price.
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ragbench.budget import LEDGER
from ragbench.cache.store import StageCache, make_key
from ragbench.errors import ConfigError, LLMError
from ragbench.llm.usage import max_cost_usd
from ragbench.types import Usage

log = logging.getLogger(__name__)

STAGE = "llm_batches"
ENDPOINT = "/v1/chat/completions"
BATCH_DISCOUNT = 0.5
# providers litellm's create_batch / retrieve_batch / file_content serve (litellm/batches/main.py)
BATCH_PROVIDERS = ("openai", "azure", "vertex_ai", "bedrock", "hosted_vllm", "mistral", "xai")
DONE = {"completed"}
FAILED = {"failed", "expired", "cancelled", "cancelling"}


def provider_of(model: str) -> str:
    """litellm's provider prefix of ``model`` (``openai/gpt-4o-mini`` -> openai; no prefix: openai)."""
    return model.split("/", 1)[0] if "/" in model else "openai"


def check_provider(model: str, role: str) -> str:
    """The provider of ``model``, or a one-line ConfigError for a provider without a batch API."""
    provider = provider_of(model)
    if provider not in BATCH_PROVIDERS:
        raise ConfigError(f"{role}.batch=true: {role}.model={model!r} is served by {provider!r}, which has no "
                          f"batch API through litellm (batch providers: {', '.join(BATCH_PROVIDERS)}); "
                          f"fix: set {role}.batch=false")
    return provider


@dataclass(frozen=True)
class BatchReply:
    """One request's reply from a batch: its text (None when the provider failed it) and usage."""

    text: str | None
    usage: Usage
    error: str | None = None


def batch_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """The cost of one batched request: litellm's batch prices, else BATCH_DISCOUNT x list price."""
    from ragbench.llm.loader import litellm

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
                 store: StageCache | None = None, poll_s: float = 10.0, max_wait_s: float = 24 * 3600.0,
                 max_tokens: int | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.model = model
        self.role = role
        self.provider = check_provider(model, role)
        self.api_base = api_base
        self.api_key = api_key
        self.store = store
        self.poll_s = poll_s
        self.max_wait_s = max_wait_s
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
        """{custom id: reply} for ``bodies`` ({custom id: chat request body without ``model``})."""
        if not bodies:
            return {}
        from ragbench.llm.loader import litellm

        lib = litellm()
        key = self.key(bodies)
        record = self.store.get_record(STAGE, key) if self.store is not None else None
        if isinstance(record, dict) and isinstance(record.get("batch_id"), str):
            self.batch_id, self.resumed = record["batch_id"], True
            log.info("%s: resuming batch %s (%d requests), submitted by an earlier run", self.role,
                     self.batch_id, len(bodies))
        else:
            self.batch_id = self._submit(lib, bodies, key)
        held = [LEDGER.reserve(BATCH_DISCOUNT * max_cost_usd(model=self.model, messages=b.get("messages", []),
                                                           max_tokens=self.max_tokens) if LEDGER.prices_requests else 0.0)
                for b in bodies.values()]
        replies: dict[str, BatchReply] = {}
        try:
            replies = self._results(lib, self._wait(lib, key))
        finally:
            for cid, hold in zip(bodies, held, strict=True):
                reply = replies.get(cid)
                LEDGER.settle(self.role, reply.usage if reply else Usage(), hold)
        missing = [cid for cid in bodies if cid not in replies]
        for cid in missing:
            replies[cid] = BatchReply(None, Usage(), "no result line for this request in the batch output")
        return replies

    def _submit(self, lib: Any, bodies: Mapping[str, Mapping[str, Any]], key: str) -> str:
        name = self.model.split("/", 1)[-1]
        lines = [json.dumps({"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": {"model": name, **body}})
                 for cid, body in bodies.items()]
        data = io.BytesIO(("\n".join(lines) + "\n").encode())
        data.name = "ragbench-batch.jsonl"
        uploaded = lib.create_file(file=data, purpose="batch", **self._kwargs())
        batch = lib.create_batch(completion_window="24h", endpoint=ENDPOINT, input_file_id=uploaded.id,
                                 **self._kwargs())
        if self.store is not None:  # recorded before any wait: a killed run resumes this batch
            self.store.put_record(STAGE, key, {"stage": STAGE, "model": self.model, "requests": len(bodies)},
                                  {"batch_id": batch.id, "input_file_id": uploaded.id, "submitted": time.time()})
        log.info("%s: submitted batch %s of %d requests to %s", self.role, batch.id, len(bodies), self.provider)
        return str(batch.id)

    def _wait(self, lib: Any, key: str) -> Any:
        start = time.monotonic()
        while True:
            batch = lib.retrieve_batch(batch_id=self.batch_id, **self._kwargs())
            counts = getattr(batch, "request_counts", None)
            done, total = getattr(counts, "completed", 0) or 0, getattr(counts, "total", 0) or 0
            log.info("%s: batch %s %s, %d/%d requests done", self.role, self.batch_id, batch.status, done, total)
            if batch.status in DONE:
                return batch
            if batch.status in FAILED:
                if self.store is not None:  # forgotten: the next run submits the requests again
                    self.store.put_record(STAGE, key, {"stage": STAGE, "model": self.model},
                                          {"failed_batch_id": self.batch_id, "status": batch.status})
                raise LLMError(f"{self.role} batch {self.batch_id} of {self.model!r} ended {batch.status}: "
                               f"{getattr(batch, 'errors', None)}; fix: rerun (a new batch is submitted) or set "
                               f"{self.role}.batch=false")
            if time.monotonic() - start > self.max_wait_s:
                raise LLMError(f"{self.role} batch {self.batch_id} is still {batch.status} after "
                               f"{self.max_wait_s:g} s; fix: rerun later: the batch id is kept, the rerun polls it")
            self.sleep(self.poll_s)

    def _results(self, lib: Any, batch: Any) -> dict[str, BatchReply]:
        out: dict[str, BatchReply] = {}
        for file_id in (batch.output_file_id, getattr(batch, "error_file_id", None)):
            if not file_id:
                continue
            content = lib.file_content(file_id=file_id, **self._kwargs())
            raw = content.content if hasattr(content, "content") else content
            for line in (raw.decode() if isinstance(raw, bytes) else str(raw)).splitlines():
                if line.strip():
                    row = json.loads(line)
                    out[row["custom_id"]] = self._reply(row)
        return out

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
                          Usage(prompt_tokens=p, completion_tokens=c, cost_usd=batch_cost(self.model, p, c)))
