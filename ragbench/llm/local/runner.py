"""A job's batch round answered by a local model: the round's requests (``ragbench.llm.batch.Batching.flush``)
generated in batches of ``batch_size``, grouped by prompt length (sorted, so each batch pads little), left
padded. Each batch is a safe point (``ragbench.interrupts``) and its replies are kept in the reply cache as
soon as it is done, so Ctrl-C during a long round stops after the batch in flight and a rerun resumes from
the cache. Every request is reserved and settled in the ledger (cost 0: ``ragbench.cost_basis=local``),
with the generation seconds and tokens (``time/generate_s``, ``llm/tokens_per_s``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from ragbench import interrupts
from ragbench.budget import LEDGER
from ragbench.errors import LLMError
from ragbench.llm.batch import BatchReply
from ragbench.types import Usage

REQUEST = "_request"  # ragbench.llm.local.client.REQUEST: the request a round's line carries

log = logging.getLogger(__name__)


class LocalRunner:
    """Answers ``bodies`` ({custom id: chat request body}) with ``client``'s local model (a LocalClient)."""

    batch_id = None  # no provider batch: nothing to poll or resume

    def __init__(self, client: Any) -> None:
        self.client = client

    def run(self, bodies: Mapping[str, Mapping[str, Any]]) -> dict[str, BatchReply]:
        client = self.client
        model = client.local_model()
        prompts: dict[str, list[int]] = {}
        out: dict[str, BatchReply] = {}
        for cid, body in bodies.items():
            ids = model.prompt_ids(body["messages"])
            room = model.context_window - client.max_new_tokens
            if len(ids) > room:  # a request nobody truncated (a judge's): refused, one line, never cut
                out[cid] = BatchReply(None, Usage(), client.overflow_message(len(ids), model.context_window))
                continue
            prompts[cid] = ids
        order = sorted(prompts, key=lambda c: len(prompts[c]))
        size = client.batch_size
        for start in range(0, len(order), size):
            interrupts.check()  # a safe point: the batches done so far are in the reply cache
            chunk = order[start : start + size]
            holds = [LEDGER.reserve(0.0) for _ in chunk]
            began = time.perf_counter()
            try:
                replies = model.generate(
                    [prompts[c] for c in chunk],
                    max_new_tokens=client.max_new_tokens,
                    temperature=client.temperature,
                    top_p=client.top_p,
                    seed=client.seed,
                )
            except RuntimeError as exc:  # out of memory, a device error: one line, the done batches kept
                for hold in holds:
                    LEDGER.settle(client.role, Usage(), hold)
                raise LLMError(
                    f"{client.where()}: generating a batch of {len(chunk)} failed ({type(exc).__name__}: "
                    f"{' '.join(str(exc).split())[:160]}); fix: lower {client.role}.batch_size"
                ) from None
            seconds = time.perf_counter() - began
            LEDGER.generated(client.role, seconds, sum(r.completion_tokens for r in replies))
            for cid, hold, reply in zip(chunk, holds, replies, strict=True):
                usage = Usage(prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens)
                LEDGER.settle(client.role, usage, hold)
                out[cid] = BatchReply(reply.text, usage)
                client.kept(bodies[cid][REQUEST], out[cid], seconds)
            log.info(
                "%s: generated %d/%d replies (%.1f s, %d tokens)",
                client.role,
                min(start + size, len(order)),
                len(order),
                seconds,
                sum(r.completion_tokens for r in replies),
            )
        return out
