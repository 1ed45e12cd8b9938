"""Token and cost accounting of one litellm response, and the most a request can cost (litellm's offline
cost map)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ragbench.llm.loader import litellm
from ragbench.types import Usage

log = logging.getLogger(__name__)
_unpriced: set[str] = set()
_unpriced_lock = threading.Lock()


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def cost_usd(response: Any, *, model: str, call_type: str = "completion") -> float:
    """``litellm.completion_cost`` of the response; 0.0 (warned once per model) when it is not priced."""
    import openai

    lib = litellm()
    try:
        return float(lib.completion_cost(completion_response=response, call_type=call_type) or 0.0)
    except (
        lib.exceptions.ModelNotMappedError,
        openai.OpenAIError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
    ) as exc:
        with _unpriced_lock:
            first = model not in _unpriced
            _unpriced.add(model)
        if first:
            log.warning(
                "no price for model %r in litellm's cost map (%s); its cost is logged as 0",
                model,
                type(exc).__name__,
            )
        return 0.0


def usage_of(response: Any, *, model: str, call_type: str = "completion") -> Usage:
    """Usage of a fresh (uncached) response: provider token counts and litellm's cost."""
    raw = getattr(response, "usage", None)
    get = raw.get if isinstance(raw, dict) else (lambda name: getattr(raw, name, 0))
    return Usage(
        prompt_tokens=_int(get("prompt_tokens")),
        completion_tokens=_int(get("completion_tokens")),
        cost_usd=cost_usd(response, model=model, call_type=call_type),
        cached=False,
    )


def usage_sum(paid: Sequence[Usage]) -> Usage:
    """The usage of every paid attempt of one call, added up."""
    return Usage(prompt_tokens=sum(u.prompt_tokens for u in paid),
                 completion_tokens=sum(u.completion_tokens for u in paid),
                 cost_usd=sum(u.cost_usd for u in paid))


def usage_to_dict(usage: Usage) -> dict[str, Any]:
    """What the response cache stores of a usage."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cost_usd": usage.cost_usd,
    }


def usage_from_cache(entry: dict[str, Any]) -> Usage:
    """A cached entry's usage: the original call's tokens and cost, marked ``cached``."""
    return Usage(
        prompt_tokens=_int(entry.get("prompt_tokens")),
        completion_tokens=_int(entry.get("completion_tokens")),
        cost_usd=float(entry.get("cost_usd") or 0.0),
        cached=True,
    )


def max_cost_usd(*, model: str, messages: Sequence[Mapping[str, str]] | None = None,
                 texts: Sequence[str] = (), max_tokens: int | None = None) -> float:
    """The most one request can cost (what ``budget.max_usd`` reserves before sending it): its prompt
    tokens (litellm's ``token_counter``) and ``max_tokens`` completion tokens (else the model's
    ``max_output_tokens``), priced by litellm's offline cost map; 0.0 for a model it does not price
    (whose cost is logged as 0, ``cost_usd``). An embedding request has no completion tokens."""
    lib = litellm()
    try:
        if messages is None:
            prompt = sum(lib.token_counter(model=model, text=t) for t in texts)
            price, _ = lib.cost_per_token(model=model, prompt_tokens=prompt, call_type="embedding")
            return float(price)
        prompt = lib.token_counter(model=model, messages=list(messages))
        completion = max_tokens if max_tokens is not None else _int(lib.get_model_info(model).get("max_output_tokens"))
        price, reply = lib.cost_per_token(model=model, prompt_tokens=prompt, completion_tokens=completion)
        return float(price) + float(reply)
    except Exception:  # noqa: BLE001 - litellm raises several types for a model it does not map
        return 0.0


def estimated_usage(*, model: str, messages: Sequence[Mapping[str, str]] | None = None,
                    texts: Sequence[str] = ()) -> Usage:
    """The work of an attempt that timed out, which the server may still have done: its prompt tokens
    (litellm's ``token_counter``: an estimate, the server never said) priced by the cost map, and no
    completion tokens (unknown: a lower bound). Zero when litellm cannot count for the model."""
    lib = litellm()
    try:
        if messages is None:
            prompt = sum(lib.token_counter(model=model, text=t) for t in texts)
        else:
            prompt = lib.token_counter(model=model, messages=list(messages))
        prompt = _int(prompt)
    except Exception:  # noqa: BLE001 - litellm raises several types for a model it does not map
        return Usage()
    try:
        price, _ = lib.cost_per_token(model=model, prompt_tokens=prompt, completion_tokens=0)
        usd = float(price)
    except Exception:  # noqa: BLE001 - unpriced: booked as 0, like a reply (cost_usd)
        usd = 0.0
    return Usage(prompt_tokens=prompt, cost_usd=usd)
