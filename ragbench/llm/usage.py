"""Token and cost accounting of one litellm response (cost from litellm's offline cost map)."""

from __future__ import annotations

import logging
import threading
from typing import Any

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

    from ragbench.llm.loader import litellm

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
