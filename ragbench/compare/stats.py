"""Paired statistics of two runs over shared cases: bootstrap CI, sign-flip p-value, Holm, verdict."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

BLOCK = 4_000_000  # resampled values held in memory at once (32 MB of float64)

Statistic = Callable[[np.ndarray], np.ndarray]  # reduces the last axis: (..., n) -> (...)


def mean(x: np.ndarray) -> np.ndarray:
    """Mean over the last axis."""
    return x.mean(axis=-1)


def p50(x: np.ndarray) -> np.ndarray:
    """Median over the last axis."""
    return np.median(x, axis=-1)


def p95(x: np.ndarray) -> np.ndarray:
    """95th percentile over the last axis (numpy's linear rule, as the job's latency metrics)."""
    return np.percentile(x, 95, axis=-1)


STATISTICS: dict[str, Statistic] = {"mean": mean, "p50": p50, "p95": p95}


@dataclass(frozen=True)
class PairedResult:
    """One run against the baseline on n paired cases."""

    n: int
    value: float
    baseline_value: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    exact: bool  # the p-value enumerates every sign pattern (small n) instead of sampling them


@functools.lru_cache(maxsize=64)
def _bootstrap_rows(n: int, resamples: int, seed: int) -> np.ndarray:
    """Resampled case indices, (resamples, n): one draw per (n, seed), shared by every comparison of
    that size, so a result never depends on the order comparisons are made in."""
    rng = np.random.default_rng([seed, n, 0])
    out = rng.integers(0, n, size=(resamples, n), dtype=np.int32 if n < 2**31 else np.int64)
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=64)
def _swaps(n: int, resamples: int, seed: int) -> tuple[np.ndarray, bool]:
    """Which pairs swap sides, (patterns, n) booleans, and whether that is every pattern (exact)."""
    if n <= 20 and 2**n <= resamples:
        codes = np.arange(2**n, dtype=np.int64)[:, None]
        out = ((codes >> np.arange(n, dtype=np.int64)) & 1).astype(bool)
        exact = True
    else:
        out = np.random.default_rng([seed, n, 1]).random((resamples, n)) < 0.5
        exact = False
    out.flags.writeable = False
    return out, exact


def _blocks(rows: int, n: int) -> range:
    return range(0, rows, max(1, BLOCK // max(n, 1)))


def bootstrap_ci(a: np.ndarray, b: np.ndarray, *, statistic: Statistic = mean, resamples: int = 2000,
                 seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile CI of ``statistic(a) - statistic(b)``, resampling the *pairs* (a case keeps its two
    values together, which is what makes the interval paired)."""
    n = len(a)
    idx = _bootstrap_rows(n, resamples, seed)
    fast = statistic is mean
    d = a - b
    deltas = np.empty(resamples)
    step = _blocks(resamples, n).step
    for lo in range(0, resamples, step):
        rows = idx[lo: lo + step]
        deltas[lo: lo + step] = mean(d[rows]) if fast else statistic(a[rows]) - statistic(b[rows])
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(deltas, [tail, 1.0 - tail])
    return float(low), float(high)


def sign_flip_pvalue(a: np.ndarray, b: np.ndarray, *, statistic: Statistic = mean, resamples: int = 2000,
                     seed: int = 0) -> tuple[float, bool]:
    """Two-sided paired randomisation test: under "no difference" each case's two values are
    exchangeable, so the labels are swapped within pairs (for the mean: the differences' signs are
    flipped). Exact over all 2**n patterns when that is at most ``resamples``; otherwise Monte Carlo
    with the (1 + hits) / (1 + resamples) estimate, never 0. Returns (p, exact)."""
    n = len(a)
    observed = float(statistic(a) - statistic(b))
    swaps, exact = _swaps(n, resamples, seed)
    fast = statistic is mean
    d = a - b
    null = np.empty(len(swaps))
    step = _blocks(len(swaps), n).step
    for lo in range(0, len(swaps), step):
        s = swaps[lo: lo + step]
        if fast:
            null[lo: lo + step] = np.where(s, -d, d).mean(axis=-1)
        else:
            null[lo: lo + step] = statistic(np.where(s, b, a)) - statistic(np.where(s, a, b))
    tol = 1e-12 * max(1.0, abs(observed))  # equal statistics computed in another order are still ties
    hits = int(np.count_nonzero(np.abs(null) >= abs(observed) - tol))
    if exact:
        return hits / len(swaps), True
    return (1 + hits) / (1 + len(swaps)), False


def paired(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, statistic: str = "mean",
           resamples: int = 2000, seed: int = 0, level: float = 0.95) -> PairedResult:
    """Value, baseline value, delta, bootstrap CI and p-value of ``a`` against ``b`` (same cases, same order)."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) == 0:
        raise ValueError(f"paired samples need the same non-zero length, got {x.shape} and {y.shape}")
    stat = STATISTICS[statistic]
    value, base = float(stat(x)), float(stat(y))
    low, high = bootstrap_ci(x, y, statistic=stat, resamples=resamples, seed=seed, level=level)
    p, exact = sign_flip_pvalue(x, y, statistic=stat, resamples=resamples, seed=seed)
    return PairedResult(n=len(x), value=value, baseline_value=base, delta=value - base, ci_low=low,
                        ci_high=high, p_value=p, exact=exact)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error), in the input order."""
    p = np.asarray(p_values, dtype=float)
    m = len(p)
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, p[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted.tolist()


BETTER, WORSE, SAME = "better", "worse", "no detectable difference"


def verdict(delta: float, p_adjusted: float, *, lower_is_better: bool, alpha: float = 0.05) -> str:
    """better / worse when the adjusted p is below ``alpha``, in the metric's own direction."""
    if p_adjusted >= alpha or delta == 0:
        return SAME
    improved = delta < 0 if lower_is_better else delta > 0
    return BETTER if improved else WORSE
