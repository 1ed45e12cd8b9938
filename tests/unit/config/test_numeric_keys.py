"""The numeric keys checked outside the config groups (``cache.lock_timeout_s``, ``dataset.max_document_mb``,
``dataset.max_decompressed_mb``, ``max_failure_rate``) go through the one rule, ``ragbench.validate.number``:
each bad value is one line naming the key, the bad value, the valid range and a value that works."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragbench.cache.store import StageCache
from ragbench.datasets.limits import Limits
from ragbench.errors import ConfigError
from ragbench.outcome import max_failure_rate


def _lock_timeout(value: Any, tmp_path: Path) -> object:
    return StageCache(dir=str(tmp_path), lock_timeout_s=value)


def _max_document(value: Any, tmp_path: Path) -> object:
    return Limits(max_document_mb=value)


def _max_decompressed(value: Any, tmp_path: Path) -> object:
    return Limits(max_decompressed_mb=value)


def _failure_rate(value: Any, tmp_path: Path) -> object:
    return max_failure_rate({"max_failure_rate": value})


POSITIVE = "use a finite number > 0"
# (key, what checks it, bad value, the value as the message shows it, the valid range and fix)
BAD: list[tuple[str, Callable[[Any, Path], object], Any, str, str]] = [
    *[("cache.lock_timeout_s", _lock_timeout, v, shown, f"{POSITIVE} (default: cache.lock_timeout_s=600)")
      for v, shown in [(0, "0"), (-1, "-1"), (math.nan, "nan"), (math.inf, "inf"), ("abc", "'abc'"),
                       (None, "None"), (True, "True"), ("600", "'600'")]],
    *[("dataset.max_document_mb", _max_document, v, shown, f"{POSITIVE} (default: dataset.max_document_mb=32)")
      for v, shown in [(0, "0"), (-0.5, "-0.5"), (math.nan, "nan"), (math.inf, "inf"), ("big", "'big'"),
                       (False, "False")]],
    *[("dataset.max_decompressed_mb", _max_decompressed, v, shown,
       f"{POSITIVE} (default: dataset.max_decompressed_mb=200)")
      for v, shown in [(0.0, "0.0"), (-1, "-1"), (-math.inf, "-inf"), (None, "None")]],
    *[("max_failure_rate", _failure_rate, v, shown, "use a finite number in [0, 1] (default: max_failure_rate=0.5)")
      for v, shown in [(-0.1, "-0.1"), (1.01, "1.01"), (math.nan, "nan"), (math.inf, "inf"), ("half", "'half'"),
                       (True, "True"), (None, "None")]],
]


@pytest.mark.parametrize(("key", "check", "value", "shown", "valid"), BAD,
                         ids=[f"{key}={shown}" for key, _, _, shown, _ in BAD])
def test_bad_value_is_the_one_rules_named_line(key, check, value, shown, valid, tmp_path):
    with pytest.raises(ConfigError) as info:
        check(value, tmp_path)
    assert str(info.value) == f"{key}={shown} is not valid: {valid}"


@pytest.mark.parametrize(("check", "value"), [
    (_lock_timeout, 0.5), (_lock_timeout, 86400), (_max_document, 0.001), (_max_document, 64),
    (_max_decompressed, 1), (_failure_rate, 0), (_failure_rate, 1),
])
def test_values_in_range_pass(check, value, tmp_path):
    check(value, tmp_path)
