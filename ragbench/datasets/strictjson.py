"""JSON read strictly: what ``json.loads`` would otherwise accept silently is refused."""

from __future__ import annotations

import json
import math
from typing import Any


class BadJSON(ValueError):
    """A JSON value the standard does not allow (NaN, Infinity, 1e999) or an object with a repeated key."""


def _no_constant(name: str) -> Any:
    raise BadJSON(f"{name} is not a JSON number (NaN and Infinity are not valid JSON)")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadJSON(f"the number {text} is out of range (it would be read as {value})")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise BadJSON(f"an object holds the key {dup!r} twice (JSON would silently keep only the last)")
    return obj


def strict_json(text: str) -> Any:
    """``json.loads`` that refuses what it would otherwise accept silently: NaN/Infinity, numbers out of
    float range, and repeated keys in one object (raises ``BadJSON``, a ValueError)."""
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite, object_pairs_hook=_unique_keys)
