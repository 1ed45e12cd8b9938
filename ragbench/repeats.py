"""``repeats``: a case's generation and judging run N times (retrieval and expansion once: they are
deterministic), each repeat with its own seed; the case's answer scores are the repeats' reduced value.

Config (``conf/config.yaml``): ``repeats.n=3`` (``repeats=3`` is the same with the default reducer) and
``repeats.reducer=mean|median|max|all_correct``; ``repeats.seed``: the first repeat's seed (repeat r asks
with ``seed + r``). With ``n`` = 1 nothing changes: no seed is sent and no cache key changes. With ``n`` > 1
every LLM request of repeat r (the generator's, the judges') carries ``seed + r`` and the repeat index in its
reply-cache key (``current``, read by ``ragbench.llm.client``), and the answer's stage-cache key holds it
too: a rerun is served from the cache, an outside system is called once per repeat.

The case record keeps every repeat (``repeats`` in its line: the reducer and per repeat its answer,
citations and answer scores), so ``ragbench.verify`` recomputes each repeat and reduces it again. Logged
per job (``METRICS``): ``repeats/n``, the mean within-case variance of each answer score, and for a score
whose every value is a 0/1 verdict pass@k (Chen et al. 2021, the unbiased 1 - C(n-c,k)/C(n,k)) and pass^k
(τ-bench's C(c,k)/C(n,k)) at k = n."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragbench.errors import ConfigError
from ragbench.metric_info import MetricInfo

REDUCERS = ("mean", "median", "max", "all_correct")
FIELD = "repeats"  # the case record's field: {"reducer": ..., "runs": [{"answer", "citations", "scores"}, ...]}
VARIANCE = "repeats/var/"  # repeats/var/<score>: the mean over cases of the score's within-case variance
PASS_AT = "repeats/pass_at_{k}/"  # repeats/pass_at_<k>/<score>
PASS_ALL = "repeats/pass_hat_{k}/"  # repeats/pass_hat_<k>/<score> (pass^k)

_SOURCE = "ragbench (repeats=N)"
METRICS: dict[str, MetricInfo] = {
    "repeats/n": MetricInfo("how many times each case was generated and judged (repeats.n)", _SOURCE,
                            kind="diagnostic", job_level="the setting", unit="count"),
    **{f"{VARIANCE}<name>/{part}": MetricInfo(
        "the score's variance across a case's repeats (ddof 1), averaged over the cases that ran every repeat",
        _SOURCE, higher_is_better=False, kind="diagnostic", job_level="mean over cases")
       for part in ("<name>", "<name>/<name>")},
    **{f"repeats/pass_at_<k>/<name>/{part}": MetricInfo(
        "pass@k of a 0/1 verdict: the chance that at least one of k repeats drawn from a case's n is correct "
        "(1 - C(n-c,k)/C(n,k), Chen et al. 2021), averaged over the cases", _SOURCE, kind="diagnostic",
        job_level="mean over cases") for part in ("<name>", "<name>/<name>")},
    **{f"repeats/pass_hat_<k>/<name>/{part}": MetricInfo(
        "pass^k of a 0/1 verdict: the chance that all of k repeats drawn from a case's n are correct "
        "(C(c,k)/C(n,k), tau-bench), averaged over the cases", _SOURCE, kind="diagnostic",
        job_level="mean over cases") for part in ("<name>", "<name>/<name>")},
}

_REPEAT: ContextVar[tuple[int, int] | None] = ContextVar("ragbench_repeat", default=None)


@dataclass(frozen=True)
class RepeatPolicy:
    """``repeats``: how many times a case is generated and judged, how its scores reduce, the first seed."""

    n: int = 1
    reducer: str = "mean"
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ConfigError(f"repeats.n={self.n!r} is not valid; fix: a whole number >= 1 (repeats=3)")
        if self.reducer not in REDUCERS:
            raise ConfigError(f"repeats.reducer={self.reducer!r} is not valid; choose one of {', '.join(REDUCERS)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"repeats.seed={self.seed!r} is not valid; fix: a whole number >= 0")

    @property
    def on(self) -> bool:
        return self.n > 1


def repeat_policy(node: Any) -> RepeatPolicy:
    """The policy of the config's ``repeats`` value: a number (``repeats=3``) or ``{n, reducer, seed}``."""
    if node is None:
        return RepeatPolicy()
    if isinstance(node, Mapping):
        unknown = sorted(set(map(str, node)) - {"n", "reducer", "seed"})
        if unknown:
            raise ConfigError(f"repeats.{unknown[0]} is not a setting of repeats; the settings are repeats.n, "
                              "repeats.reducer and repeats.seed")
        return RepeatPolicy(n=_whole("repeats.n", node.get("n", 1)), reducer=str(node.get("reducer") or "mean"),
                            seed=_whole("repeats.seed", node.get("seed", 0)))
    return RepeatPolicy(n=_whole("repeats", node))


def _whole(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(f"{key}={value!r} is not valid; fix: a whole number (repeats=3)")
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"{key}={value!r} is not valid; fix: a whole number (repeats=3)") from None
    if not number.is_integer():
        raise ConfigError(f"{key}={value!r} is not valid; fix: a whole number (repeats=3)")
    return int(number)


# ---- the repeat in flight: its seed and index reach every LLM request made for it ---------------------

@contextmanager
def repeat(index: int | None, seed: int = 0) -> Iterator[None]:
    """LLM requests made inside carry ``seed`` + ``index`` and the index in their cache key (None: none)."""
    token = _REPEAT.set(None if index is None else (index, seed + index))
    try:
        yield
    finally:
        _REPEAT.reset(token)


def current() -> tuple[int, int] | None:
    """(repeat index, seed) of the repeat being run in this thread, or None outside a repeat."""
    return _REPEAT.get()


# ---- reducing ----------------------------------------------------------------------------------------

def reduce(values: Sequence[float] | np.ndarray, reducer: str) -> float:
    """One case's value from its repeats' values: mean, median, max, or all_correct (the minimum: 1 for a 0/1
    verdict only when every repeat is correct)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return float("nan")
    if reducer == "mean":
        return float(x.mean())
    if reducer == "median":
        return float(np.median(x))
    if reducer == "max":
        return float(x.max())
    if reducer == "all_correct":
        return float(x.min())
    raise ConfigError(f"repeats.reducer={reducer!r} is not valid; choose one of {', '.join(REDUCERS)}")


def reduce_rows(x: np.ndarray, reducer: str) -> np.ndarray:
    """``reduce`` over the last axis of ``x`` (NaN: no value there; a row of NaN reduces to NaN)."""
    with warnings.catch_warnings():  # a row of NaN (no value): NaN, without numpy's warning
        warnings.simplefilter("ignore", RuntimeWarning)
        if reducer == "mean":
            return np.asarray(np.nanmean(x, axis=-1))
        if reducer == "median":
            return np.asarray(np.nanmedian(x, axis=-1))
        if reducer == "max":
            return np.asarray(np.nanmax(x, axis=-1))
        if reducer == "all_correct":
            return np.asarray(np.nanmin(x, axis=-1))
    raise ConfigError(f"repeats.reducer={reducer!r} is not valid; choose one of {', '.join(REDUCERS)}")


def reduce_scores(runs: Sequence[Mapping[str, float]], reducer: str) -> dict[str, float]:
    """Every key some repeat scored, reduced over the repeats that have it."""
    keys = sorted({k for r in runs for k in r})
    return {k: reduce([float(r[k]) for r in runs if k in r], reducer) for k in keys}


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of Chen et al. (2021): 1 - C(n-c, k) / C(n, k), for c correct of n repeats."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k (τ-bench, Yao et al. 2024): C(c, k) / C(n, k), the chance that k repeats drawn are all correct."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass^k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    return math.comb(c, k) / math.comb(n, k)


def _binary(values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values)


def repeat_metrics(runs_of_cases: Sequence[Sequence[Mapping[str, float]]], n: int) -> dict[str, float]:
    """The job's repeat metrics from each case's repeat scores (the cases that ran: ``runs_of_cases``):
    ``repeats/n``; per answer score, the mean within-case variance over the cases that scored it in every
    repeat; for a score that is a 0/1 verdict in every case and repeat, pass@n and pass^n."""
    if n < 2:
        return {}
    out: dict[str, float] = {"repeats/n": float(n)}
    full: dict[str, list[list[float]]] = {}
    for runs in runs_of_cases:
        if len(runs) != n:
            continue
        for key in sorted({k for r in runs for k in r}):
            if key.endswith("judge_failed") or key.startswith("latency/"):
                continue
            vals = [float(r[key]) for r in runs if key in r and math.isfinite(float(r[key]))]
            if len(vals) == n:
                full.setdefault(key, []).append(vals)
    for key, cases in full.items():
        out[f"{VARIANCE}{key}"] = float(np.mean([np.var(v, ddof=1) for v in cases]))
        if all(_binary(v) for v in cases):
            correct = [int(sum(v)) for v in cases]
            out[f"{PASS_AT.format(k=n)}{key}"] = float(np.mean([pass_at_k(n, c, n) for c in correct]))
            out[f"{PASS_ALL.format(k=n)}{key}"] = float(np.mean([pass_hat_k(n, c, n) for c in correct]))
    return out


def record_runs(row: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]] | None:
    """(reducer, runs) of a case record's ``repeats`` field, or None when the case has none."""
    rep = row.get(FIELD)
    if not isinstance(rep, Mapping) or not isinstance(rep.get("runs"), list) or len(rep["runs"]) < 2:
        return None
    return str(rep.get("reducer") or "mean"), [dict(r) for r in rep["runs"] if isinstance(r, Mapping)]
