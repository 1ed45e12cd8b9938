"""What one LLM call returns: a chat completion or a batch of embeddings, and the reading of a reply."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragbench.llm.errors import LLMResponseError, fix_for
from ragbench.types import Usage


class EmptyReply(Exception):
    """A 200 reply with no usable completion (no ``choices``): retried like a 5xx."""


@dataclass(frozen=True)
class Completion:
    """One chat reply: text, usage (``cached`` when served from disk), wall latency and attempts made."""

    text: str
    model: str
    usage: Usage
    latency_s: float
    attempts: int


@dataclass(frozen=True)
class Embeddings:
    """Vectors of one batch of texts, in input order."""

    vectors: tuple[tuple[float, ...], ...]
    usage: Usage
    latency_s: float


def embedding_vectors(response: Any, expected: int, where: str) -> tuple[tuple[float, ...], ...]:
    data = getattr(response, "data", None) or []
    rows: list[tuple[int, tuple[float, ...]]] = []
    for i, item in enumerate(data):
        get = item.get if isinstance(item, dict) else (lambda name, _item=item: getattr(_item, name, None))
        vec = get("embedding")
        if not isinstance(vec, list):
            raise LLMResponseError(
                f"{where}: embedding {i} is not a list of floats\n  fix: {fix_for(LLMResponseError)}"
            )
        index = get("index")
        rows.append((int(index) if index is not None else i, tuple(float(x) for x in vec)))
    if len(rows) != expected:
        raise LLMResponseError(
            f"{where}: asked for {expected} embeddings, got {len(rows)}\n  fix: {fix_for(LLMResponseError)}"
        )
    rows.sort(key=lambda r: r[0])
    return tuple(v for _, v in rows)
