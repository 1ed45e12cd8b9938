"""A job's wave answered by a local model: the wave's requests (``ragbench.llm.wave.Wave.flush``)
generated in batches of ``batch_size``, grouped by prompt length (sorted, so each batch pads little), left
padded. Each batch is a safe point (``ragbench.interrupts``) and its replies are kept in the reply cache as
soon as it is done, so Ctrl-C during a long wave stops after the batch in flight and a rerun resumes from
the cache. Every request is reserved and settled in the ledger (cost 0: ``ragbench.cost_basis=local``),
with the generation seconds and tokens (``time/generate_s``, ``llm/tokens_per_s``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ragbench import interrupts
from ragbench.errors import LLMError
from ragbench.llm.batch import BatchReply
from ragbench.llm.local.grammar import Plan, graded_field
from ragbench.session import LEDGER
from ragbench.types import Usage

REQUEST = "_request"  # ragbench.llm.local.client.REQUEST: the request a wave's line carries

log = logging.getLogger(__name__)
T = TypeVar("T")


class LocalRunner:
    """Answers ``bodies`` ({custom id: chat request body}) with ``client``'s local model (a LocalClient)."""

    batch_id = None  # no provider batch: nothing to poll or resume

    def __init__(self, client: Any) -> None:
        self.client = client

    def run(self, bodies: Mapping[str, Mapping[str, Any]]) -> dict[str, BatchReply]:
        """Graded verdicts (a ``response_format`` of ``ragbench.llm.local.grammar``'s form) by constrained
        decoding, the other requests generated freely."""
        client = self.client
        model = client.local_model()
        prompts: dict[str, list[int]] = {}
        plans: dict[str, Plan] = {}
        out: dict[str, BatchReply] = {}
        for cid, body in bodies.items():
            ids = model.prompt_ids(body["messages"])
            room = model.context_window - client.max_new_tokens
            if len(ids) > room:  # a request nobody truncated (a judge's): refused, one line, never cut
                out[cid] = BatchReply(None, Usage(), client.overflow_message(len(ids), model.context_window))
                continue
            graded = graded_field(body.get("response_format"))
            how = model.plan(graded) if graded is not None else None
            if how is not None:  # a graded verdict: constrained decoding (ragbench.llm.local.grammar)
                plans[cid] = how
            prompts[cid] = ids
        self._choose(model, {c: prompts.pop(c) for c in plans}, plans, bodies, out)
        self._generate(model, prompts, bodies, out)
        return out

    def _generate(
        self,
        model: Any,
        prompts: Mapping[str, list[int]],
        bodies: Mapping[str, Mapping[str, Any]],
        out: dict[str, BatchReply],
    ) -> None:
        """Free generation of ``prompts``, in batches of similar length."""
        client = self.client
        order = sorted(prompts, key=lambda c: len(prompts[c]))
        size = client.batch_size
        for start in range(0, len(order), size):
            chunk = order[start : start + size]
            replies, holds, seconds = self._batch(
                f"generating a batch of {len(chunk)}", chunk, model.generate, [prompts[c] for c in chunk],
                max_new_tokens=client.max_new_tokens, temperature=client.temperature, top_p=client.top_p,
                seed=batch_seed(client.seed, [bodies[c] for c in chunk]))
            LEDGER.generated(client.role, seconds, sum(r.completion_tokens for r in replies))
            self._keep(chunk, holds, [BatchReply(r.text, Usage(prompt_tokens=r.prompt_tokens,
                                                                completion_tokens=r.completion_tokens))
                                      for r in replies], seconds, bodies, out)
            log.info(
                "%s: generated %d/%d replies (%.1f s, %d tokens)",
                client.role,
                min(start + size, len(order)),
                len(order),
                seconds,
                sum(r.completion_tokens for r in replies),
            )

    def _batch(self, what: str, chunk: Sequence[str], work: Callable[..., T], *args: Any,
               **kwargs: Any) -> tuple[T, list[Any], float]:
        """One batch at a safe point (the batches done so far are in the reply cache): each request reserved
        in the ledger, ``work(*args, **kwargs)`` timed; (its result, the reservations, seconds). A device error (out of
        memory...) settles the reservations and is one line; the batches done before are kept."""
        client = self.client
        interrupts.check()
        holds = [LEDGER.reserve(0.0) for _ in chunk]
        began = time.perf_counter()
        try:
            result = work(*args, **kwargs)
        except RuntimeError as exc:
            for hold in holds:
                LEDGER.settle(client.role, Usage(), hold)
            raise LLMError(
                f"{client.where()}: {what} failed ({type(exc).__name__}: "
                f"{' '.join(str(exc).split())[:160]}); fix: lower {client.role}.batch_size"
            ) from None
        return result, holds, time.perf_counter() - began

    def _keep(self, chunk: Sequence[str], holds: Sequence[Any], replies: Sequence[BatchReply], seconds: float,
              bodies: Mapping[str, Mapping[str, Any]], out: dict[str, BatchReply]) -> None:
        """A batch's replies settled in the ledger against their reservations, answered and kept (the reply
        cache): the batches done so far survive a later failure."""
        for cid, hold, reply in zip(chunk, holds, replies, strict=True):
            LEDGER.settle(self.client.role, reply.usage, hold)
            out[cid] = reply
            self.client.kept(bodies[cid][REQUEST], reply, seconds)

    def _choose(
        self,
        model: Any,
        prompts: Mapping[str, list[int]],
        plans: Mapping[str, Plan],
        bodies: Mapping[str, Mapping[str, Any]],
        out: dict[str, BatchReply],
    ) -> None:
        """Graded verdicts by constrained decoding: per batch of requests sharing a plan, one forward pass
        over the prompts with the forced prefix; the reply is ``{"<field>": <the chosen value>}``."""
        client = self.client
        groups: dict[Plan, list[str]] = {}
        for cid in sorted(prompts, key=lambda c: len(prompts[c])):
            groups.setdefault(plans[cid], []).append(cid)
        size = client.batch_size
        for how, cids in groups.items():
            for start in range(0, len(cids), size):
                chunk = cids[start : start + size]
                chosen, holds, seconds = self._batch(
                    f"scoring a batch of {len(chunk)} verdicts", chunk, model.choose,
                    [[*prompts[c], *how.prefix] for c in chunk], how.tokens, temperature=client.temperature,
                    seed=batch_seed(client.seed, [bodies[c] for c in chunk]))
                completion = len(how.prefix) + 2  # the forced prefix, the chosen value and the closing brace
                LEDGER.generated(client.role, seconds, completion * len(chunk))
                replies = [BatchReply(how.reply(index), Usage(prompt_tokens=len(prompts[cid]),
                                                              completion_tokens=completion))
                           for cid, index in zip(chunk, chosen, strict=True)]
                self._keep(chunk, holds, replies, seconds, bodies, out)
                log.info(
                    "%s: chose %d/%d constrained %r verdicts (%.1f s, one forward pass)",
                    client.role,
                    min(start + size, len(cids)),
                    len(cids),
                    how.graded.field,
                    seconds,
                )


def batch_seed(seed: int | None, bodies: Sequence[Mapping[str, Any]]) -> int | None:
    """The seed a batch samples with: the client's, or under ``repeats=N`` the repeat's (each repeat is a wave
    of its own, so a batch holds one repeat's requests; ragbench.repeats)."""
    for body in bodies:
        params = (body.get(REQUEST) or {}).get("params") or {}
        if "case_repeat" in params and params.get("seed") is not None:  # ragbench.llm.client.REPEAT
            return int(params["seed"])
    return seed
