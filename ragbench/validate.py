"""The one rule for a numeric config value: a real number (or integer), finite, inside its range."""

from __future__ import annotations

import math
from typing import Any

from ragbench.errors import ConfigError


def _range(lo: float | None, hi: float | None, *, lo_open: bool) -> str:
    if lo is not None and hi is not None:
        return f"in {'(' if lo_open else '['}{lo:g}, {hi:g}]"
    if lo is not None:
        return f"{'>' if lo_open else '>='} {lo:g}"
    if hi is not None:
        return f"<= {hi:g}"
    return ""


def number(name: str, value: Any, *, lo: float | None = None, hi: float | None = None, integer: bool = False,
           lo_open: bool = False, optional: bool = False, default: float | None = None) -> int | float | None:
    """``value`` checked and returned as int or float; a one-line ConfigError naming ``name``, the bad value,
    the valid range and the fix (``default``, when given, is named as a value that works).

    Rejects booleans, strings (``topk=abc``), NaN and infinities; ``optional`` also accepts None (null).
    """
    want = " ".join(filter(None, ["an integer" if integer else "a finite number", _range(lo, hi, lo_open=lo_open)]))
    want += " or null" if optional else ""
    want += f" (default: {name}={default:g})" if default is not None else ""
    if value is None and optional:
        return None
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and isinstance(value, float) and not math.isfinite(value):
        ok = False
    if ok and integer and isinstance(value, float):
        ok = value.is_integer()
    if ok:
        value = int(value) if integer else value
        ok = not ((lo is not None and (value < lo or (lo_open and value == lo))) or (hi is not None and value > hi))
    if not ok:
        raise ConfigError(f"{name}={value!r} is not valid: use {want}")
    return value


def real(name: str, value: Any, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
         default: float | None = None) -> float:
    """:func:`number` for a key that is never null, returned as a float (``cache.lock_timeout_s=600``)."""
    checked = number(name, value, lo=lo, hi=hi, lo_open=lo_open, default=default)
    assert checked is not None
    return float(checked)


def integer(name: str, value: Any, *, lo: float | None = None, hi: float | None = None,
            default: int | None = None) -> int:
    """:func:`number` for a whole-number key that is never null (``retrieval.retriever.candidates=50``)."""
    checked = number(name, value, lo=lo, hi=hi, integer=True, default=default)
    assert checked is not None
    return int(checked)
