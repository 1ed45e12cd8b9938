"""Power of a paired comparison: the minimum detectable effect (MDE) at a sample size, and the sample size
that detects a given effect.

The model is the two-sided paired t-test on the per-case differences d_i = a_i - b_i, with their observed
standard deviation s (ddof 1). At n cases, level alpha and effect delta, the test statistic follows a
noncentral t with n - 1 degrees of freedom and noncentrality delta * sqrt(n) / s, so

    power(delta) = P(T' > t_{1-alpha/2, n-1}) + P(T' < -t_{1-alpha/2, n-1}),
    T' ~ nct(n - 1, delta sqrt(n) / s)

and the MDE is the delta where power(delta) equals the asked power (0.8 by default), found by root finding.
This is statsmodels' ``TTestPower`` (tests/unit/compare/test_power.py checks it against it). A t-based rule
rather than the normal approximation ``(z_{1-alpha/2} + z_power) s / sqrt(n)``: at the small samples where
the question matters (n = 18) the normal one claims an MDE 6% too small; at n = 1,000 they agree to
0.1%. compare's own test is a sign-flip randomisation test, whose power on the mean difference is the
paired t-test's to first order (a simulation in the same test file checks the detection rate at the MDE
on 0/1 scores). A randomisation test over n pairs cannot give p below 2 / 2**n: when that is not below
alpha, no effect is detectable (the MDE is infinite).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize
from scipy import stats as sps

DEFAULT_POWER = 0.8
MAX_QUESTIONS = 10_000_000  # beyond this a "questions needed" is reported as more than it


def power_problem(power: float) -> str | None:
    """Why ``power`` cannot be a target power (one line naming the fix), or None."""
    if math.isfinite(power) and 0.05 <= power <= 0.999:
        return None
    return f"power {power!r}: use a number from 0.05 to 0.999, e.g. 0.8 (the default)"


def paired_power(effect: float, sd: float, n: int, alpha: float) -> float:
    """The probability that a two-sided paired t-test at level ``alpha`` on ``n`` differences with standard
    deviation ``sd`` rejects when their true mean is ``effect``."""
    if n < 2 or not sd > 0:
        return float("nan")
    df = n - 1
    crit = float(sps.t.ppf(1 - alpha / 2, df))
    nc = abs(effect) * math.sqrt(n) / sd
    lower = float(sps.nct.cdf(-crit, df, nc))  # the wrong-sign tail: scipy gives NaN where it underflows
    return float(sps.nct.sf(crit, df, nc)) + (lower if math.isfinite(lower) else 0.0)


def detectable(n: int, alpha: float) -> bool:
    """Whether a paired randomisation test over ``n`` pairs can reach p < ``alpha`` at all (its smallest
    two-sided p is 2 / 2**n)."""
    return n >= 2 and 2.0 ** (1 - n) < alpha


def mde(sd: float, n: int, alpha: float, power: float = DEFAULT_POWER) -> float:
    """The smallest |mean difference| a two-sided paired test at level ``alpha`` detects with probability
    ``power`` over ``n`` cases whose differences have standard deviation ``sd``. 0 when ``sd`` is 0 (every
    difference is the same: any non-zero one is seen); ``inf`` when ``n`` pairs cannot reach ``alpha``;
    NaN for fewer than 2 cases or a NaN ``sd``."""
    if n < 2 or not math.isfinite(sd):
        return float("nan")
    if not detectable(n, alpha):
        return float("inf")
    if sd == 0:
        return 0.0
    target = lambda d: paired_power(d * sd, sd, n, alpha) - power  # noqa: E731 - d in units of sd
    high = 1.0
    while target(high) < 0:
        high *= 2
    return float(optimize.brentq(target, 0.0, high, xtol=1e-12, rtol=1e-10)) * sd


def questions_needed(sd: float, delta: float, alpha: float, power: float = DEFAULT_POWER) -> int:
    """The fewest paired cases at which a two-sided paired test at level ``alpha`` detects a mean difference
    ``delta`` with probability ``power``, differences having standard deviation ``sd`` (2 when ``sd`` is 0;
    ``MAX_QUESTIONS + 1`` when more than ``MAX_QUESTIONS``)."""
    if not (math.isfinite(sd) and math.isfinite(delta) and delta != 0):
        raise ValueError(f"questions_needed needs a finite sd and a non-zero delta, got {sd!r}, {delta!r}")
    low = 2
    while not detectable(low, alpha):
        low += 1
    if sd == 0:
        return low
    z = float(sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power))
    n = max(low, math.ceil((z * sd / abs(delta)) ** 2))  # the normal rule: a lower bound of the t-based one
    if n > MAX_QUESTIONS:
        return MAX_QUESTIONS + 1
    while paired_power(delta, sd, n, alpha) < power:
        n += 1
    while n > low and paired_power(delta, sd, n - 1, alpha) >= power:
        n -= 1
    return n


def difference_sd(a: np.ndarray, b: np.ndarray) -> float:
    """The standard deviation (ddof 1) of the paired differences ``a - b``; NaN under 2 pairs."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    return float(np.std(d, ddof=1)) if len(d) >= 2 else float("nan")
