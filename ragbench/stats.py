"""Paired statistics of two runs over shared cases: bootstrap CI, sign-flip p-value, Holm, verdict."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragbench.repeats import reduce_rows

BLOCK = 2_000_000  # resampled values streamed at once (16 MB of float64)
CACHED = 8_000_000  # the largest resample matrix kept for reuse (64 MB; a few are kept, see _weights)

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


def _block_rows(n: int) -> int:
    return max(1, BLOCK // max(n, 1))


def _draws(kind: str, n: int, resamples: int, seed: int) -> tuple[Iterator[np.ndarray], bool]:
    """The resamples in blocks of rows, and whether they are exhaustive. ``boot``: case indices drawn
    with replacement; ``swap``: which pairs swap sides (every 2**n pattern when that is at most
    ``resamples``: an exact test). Each block has its own seed ([seed, n, kind, block]), so the draws
    depend only on (n, resamples, seed): never on which comparison asks first or how they are cached."""
    if kind == "swap" and n <= 20 and 2**n <= resamples:
        codes = np.arange(2**n, dtype=np.int64)[:, None]
        return iter([((codes >> np.arange(n, dtype=np.int64)) & 1).astype(bool)]), True
    step = _block_rows(n)

    def blocks() -> Iterator[np.ndarray]:
        for b, lo in enumerate(range(0, resamples, step)):
            rng = np.random.default_rng([seed, n, 0 if kind == "boot" else 1, b])
            size = min(step, resamples - lo)
            yield rng.integers(0, n, size=(size, n)) if kind == "boot" else rng.random((size, n)) < 0.5
    return blocks(), False


@functools.lru_cache(maxsize=4)
def _weights(kind: str, n: int, resamples: int, seed: int) -> tuple[np.ndarray | None, bool]:
    """For the mean, the resamples as one (rows, n) matrix W with ``W @ d`` = every resample's mean
    difference (bootstrap counts / n, or signs / n), shared by every comparison of that size; None
    when it would exceed CACHED values (the caller then streams the blocks)."""
    blocks, exact = _draws(kind, n, resamples, seed)
    if resamples * n > CACHED and not exact:
        return None, exact
    w = np.empty((2**n if exact else resamples, n))  # filled block by block, divided in place: no copies
    lo = 0
    for blk in blocks:
        rows = w[lo:lo + len(blk)]
        if kind == "boot":  # each row's counts of every case index: one bincount over the block, row-offset
            blk += np.arange(len(blk))[:, None] * n
            rows[:] = np.bincount(blk.ravel(), minlength=blk.size).reshape(blk.shape)
        else:
            rows[:] = np.where(blk, -1.0, 1.0)
        lo += len(blk)
    w /= n
    w.flags.writeable = False
    return w, exact


def release() -> None:
    """Frees the cached resample matrices (a comparison is done)."""
    _weights.cache_clear()


@functools.cache
def _blas() -> Any:
    """The BLAS libraries' thread pools (``threadpoolctl``). ``W @ d`` runs on one thread: a product of a few MB,
    for which the pool's other threads mostly spin (n = 1,540: 8 ms of CPU on two threads, 1.2 ms on one). The
    same numbers either way: each resample's mean is one dot product, computed whole by one thread."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _resampled(kind: str, a: np.ndarray, b: np.ndarray, statistic: Statistic, resamples: int,
               seed: int) -> tuple[np.ndarray, bool]:
    """``statistic(a*) - statistic(b*)`` over every resample (bootstrap or within-pair swap)."""
    n = len(a)
    if statistic is mean:
        w, exact = _weights(kind, n, resamples, seed)
        if w is not None:
            with _blas().limit(limits=1, user_api="blas"):
                return w @ (a - b), exact
    blocks, exact = _draws(kind, n, resamples, seed)
    out = []
    for blk in blocks:
        if kind == "boot":
            out.append(statistic(a[blk]) - statistic(b[blk]))
        else:
            out.append(statistic(np.where(blk, b, a)) - statistic(np.where(blk, a, b)))
    return np.concatenate(out), exact


def bootstrap_ci(a: np.ndarray, b: np.ndarray, *, statistic: Statistic = mean, resamples: int = 2000,
                 seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile CI of ``statistic(a) - statistic(b)``, resampling the *pairs* (a case keeps its two
    values together, which is what makes the interval paired)."""
    deltas, _ = _resampled("boot", a, b, statistic, resamples, seed)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(deltas, [tail, 1.0 - tail])
    return float(low), float(high)


def two_level_ci(a: Sequence[np.ndarray], b: Sequence[np.ndarray], *, reducer: tuple[str, str] = ("mean", "mean"),
                 resamples: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile CI of mean(a) - mean(b) by a two-level paired bootstrap (``repeats=N``): ``a[i]``, ``b[i]``
    are case i's repeat values on each side (one value: a case without repeats). Each resample draws the
    cases with replacement, exactly as ``bootstrap_ci`` does (the same draws), then within each drawn case
    its repeats with replacement, reduced by the side's ``reducer`` (ragbench.repeats) into the case's value.
    With every case's repeats equal the interval is ``bootstrap_ci``'s; repeat variance widens it."""
    n = len(a)
    if n == 0 or len(b) != n:
        raise ValueError(f"paired samples need the same non-zero length, got {len(a)} and {len(b)}")

    def padded(side: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        width = max(len(x) for x in side)
        out = np.full((n, width), np.nan)
        for i, x in enumerate(side):
            out[i, : len(x)] = x
        return out, np.array([len(x) for x in side], dtype=np.int64)

    (va, ma), (vb, mb) = padded(a), padded(b)
    blocks, _ = _draws("boot", n, resamples, seed)
    deltas = []
    for bi, blk in enumerate(blocks):  # blk: (rows, n) case indices, as bootstrap_ci draws them
        rng = np.random.default_rng([seed, n, 2, bi])
        sides = []
        for values, counts, how in ((va, ma, reducer[0]), (vb, mb, reducer[1])):
            m = counts[blk]  # (rows, n) repeats of each drawn case
            width = values.shape[1]
            picks = np.minimum((rng.random((*blk.shape, width)) * m[..., None]).astype(np.int64), m[..., None] - 1)
            drawn = values[blk[..., None], picks]  # (rows, n, width)
            drawn[np.arange(width) >= m[..., None]] = np.nan  # a case with fewer repeats: only m of them
            sides.append(reduce_rows(drawn, how).mean(axis=-1))
        deltas.append(sides[0] - sides[1])
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(np.concatenate(deltas), [tail, 1.0 - tail])
    return float(low), float(high)


def sign_flip_pvalue(a: np.ndarray, b: np.ndarray, *, statistic: Statistic = mean, resamples: int = 2000,
                     seed: int = 0) -> tuple[float, bool]:
    """Two-sided paired randomisation test: under "no difference" each case's two values are
    exchangeable, so the labels are swapped within pairs (for the mean: the differences' signs are
    flipped). Exact over all 2**n patterns when that is at most ``resamples``; otherwise Monte Carlo
    with the (1 + hits) / (1 + resamples) estimate, never 0. Returns (p, exact)."""
    observed = float(statistic(a) - statistic(b))
    null, exact = _resampled("swap", a, b, statistic, resamples, seed)
    tol = 1e-9 * max(1.0, abs(observed))  # equal statistics summed in another order are still ties
    hits = int(np.count_nonzero(np.abs(null) >= abs(observed) - tol))
    if exact:
        return hits / len(null), True
    return (1 + hits) / (1 + len(null)), False


def paired(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, statistic: str = "mean",
           resamples: int = 2000, seed: int = 0, level: float = 0.95,
           repeats: tuple[Sequence[np.ndarray], Sequence[np.ndarray], tuple[str, str]] | None = None) -> PairedResult:
    """Value, baseline value, delta, bootstrap CI and p-value of ``a`` against ``b`` (same cases, same order).
    ``repeats``: each case's repeat values on each side and the sides' reducers (``repeats=N``): the CI is then
    ``two_level_ci``'s (the mean only); the p-value is the sign-flip test on the case values either way."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) == 0:
        raise ValueError(f"paired samples need the same non-zero length, got {x.shape} and {y.shape}")
    stat = STATISTICS[statistic]
    value, base = float(stat(x)), float(stat(y))
    if repeats is not None and stat is mean:
        low, high = two_level_ci(repeats[0], repeats[1], reducer=repeats[2], resamples=resamples, seed=seed,
                                 level=level)
    else:
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
NEGLIGIBLE = "no practical difference"  # significant after Holm, but smaller than the metric's practical threshold
VERDICTS = (BETTER, WORSE, NEGLIGIBLE, SAME)


def verdict(delta: float, p_adjusted: float, *, lower_is_better: bool, alpha: float = 0.05,
            min_effect: float = 0.0) -> str:
    """better / worse when the adjusted p is below ``alpha`` *and* ``|delta|`` reaches ``min_effect`` (the
    metric's practical threshold, in its own units), in the metric's own direction; a significant difference
    below the threshold is ``NEGLIGIBLE``, an insignificant one ``SAME``."""
    if p_adjusted >= alpha or delta == 0:
        return SAME
    if abs(delta) < min_effect * (1 - 1e-9):  # 0.57 - 0.56 is 0.00999...: it is the threshold, not below it
        return NEGLIGIBLE
    improved = delta < 0 if lower_is_better else delta > 0
    return BETTER if improved else WORSE
