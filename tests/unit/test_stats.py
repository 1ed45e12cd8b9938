"""The paired statistics against hand-worked cases and scipy's reference implementations."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from ragbench import stats


def test_identical_runs_delta_zero_ci_zero_p_one():
    x = np.random.default_rng(1).random(200)
    r = stats.paired(x, x.copy(), resamples=1000, seed=0)
    assert r.delta == 0.0 and r.ci_low == 0.0 and r.ci_high == 0.0 and r.p_value == 1.0
    assert r.ci_low <= 0.0 <= r.ci_high
    assert stats.verdict(r.delta, r.p_value, lower_is_better=False) == stats.SAME


def test_clear_improvement_is_significant_and_better():
    rng = np.random.default_rng(2)
    base = rng.random(300)
    better = np.clip(base + 0.1 + rng.normal(0, 0.02, 300), 0, None)
    r = stats.paired(better, base, resamples=1000, seed=0)
    assert r.p_value < 0.01 and r.ci_low > 0.05 and r.delta == pytest.approx(np.mean(better - base))
    assert stats.verdict(r.delta, r.p_value, lower_is_better=False) == stats.BETTER
    # the same change on a cost metric (tokens, latency) is a regression
    assert stats.verdict(r.delta, r.p_value, lower_is_better=True) == stats.WORSE
    assert stats.verdict(-r.delta, r.p_value, lower_is_better=True) == stats.BETTER


def test_hand_worked_exact_sign_flip():
    # d = (1, 1, 1): of the 8 sign patterns only +++ and --- reach |mean| >= 1, so p = 2/8
    p, exact = stats.sign_flip_pvalue(np.ones(3), np.zeros(3), resamples=1000)
    assert exact and p == 0.25
    # d = (2, -1, 0.5), observed sum 1.5; the 8 signed sums of (2, 1, 0.5) are
    # 3.5 2.5 1.5 0.5 -0.5 -1.5 -2.5 -3.5, and 6 of them reach |sum| >= 1.5: p = 6/8
    p, exact = stats.sign_flip_pvalue(np.array([2.0, -1.0, 0.5]), np.zeros(3), resamples=1000)
    assert exact and p == 0.75


@pytest.mark.parametrize("n", [8, 9])
def test_exact_p_matches_scipy_permutation_test(n):
    rng = np.random.default_rng(n)
    a, b = rng.random(n), rng.random(n)
    ours, exact = stats.sign_flip_pvalue(a, b, resamples=2**n)
    ref = scipy.stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis),
                                       permutation_type="samples", n_resamples=np.inf, vectorized=True)
    assert exact and ours == pytest.approx(ref.pvalue, abs=1e-12)


def test_monte_carlo_p_close_to_scipy():
    rng = np.random.default_rng(5)
    a = rng.random(150)
    b = a - 0.03 + rng.normal(0, 0.2, 150)
    ours, exact = stats.sign_flip_pvalue(a, b, resamples=20000, seed=3)
    ref = scipy.stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis),
                                       permutation_type="samples", n_resamples=20000, vectorized=True,
                                       random_state=0)
    assert not exact and ours == pytest.approx(ref.pvalue, abs=0.02)


def test_bootstrap_ci_close_to_scipy_percentile():
    rng = np.random.default_rng(6)
    a, b = rng.random(120), rng.random(120)
    low, high = stats.bootstrap_ci(a, b, resamples=20000, seed=1)
    ref = scipy.stats.bootstrap((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), paired=True,
                                vectorized=True, method="percentile", n_resamples=20000, random_state=0)
    assert low == pytest.approx(ref.confidence_interval.low, abs=0.01)
    assert high == pytest.approx(ref.confidence_interval.high, abs=0.01)


def test_bootstrap_reproducible_under_seed():
    rng = np.random.default_rng(7)
    a, b = rng.random(80), rng.random(80)
    assert stats.bootstrap_ci(a, b, resamples=1000, seed=4) == stats.bootstrap_ci(a, b, resamples=1000, seed=4)
    stats._weights.cache_clear()  # a fresh draw from the seed, not a cached array
    assert stats.bootstrap_ci(a, b, resamples=1000, seed=4) == stats.bootstrap_ci(a, b, resamples=1000, seed=4)
    assert stats.bootstrap_ci(a, b, resamples=1000, seed=4) != stats.bootstrap_ci(a, b, resamples=1000, seed=5)


def test_constant_difference_ci_is_that_difference():
    a = np.linspace(0, 1, 50)
    low, high = stats.bootstrap_ci(a + 0.25, a, resamples=500)
    assert low == pytest.approx(0.25) and high == pytest.approx(0.25)


def test_pairing_matters():
    """A small, consistent gain on questions of very different difficulty: the paired test sees it,
    an unpaired test (the same data with the pairing ignored) does not."""
    rng = np.random.default_rng(8)
    base = rng.random(100)  # difficulty spreads scores over [0, 1]
    run = base + 0.02 + rng.normal(0, 0.005, 100)
    r = stats.paired(run, base, resamples=2000, seed=0)
    assert r.p_value < 0.001 and r.ci_low > 0
    unpaired = scipy.stats.permutation_test((run, base), lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
                                            permutation_type="independent", n_resamples=2000, random_state=0)
    assert unpaired.pvalue > 0.3
    # and our result really depends on the pairing: break it and the difference is no longer detected
    shuffled = stats.paired(rng.permutation(run), base, resamples=2000, seed=0)
    assert shuffled.p_value > 0.3 and shuffled.ci_low < 0 < shuffled.ci_high


def test_median_statistic_swaps_within_pairs():
    a = np.array([10.0, 12.0, 11.0, 50.0, 9.0])
    r = stats.paired(a, a, statistic="p50", resamples=100)
    assert r.p_value == 1.0 and r.delta == 0.0 and r.exact
    r = stats.paired(a + 5, a, statistic="p50", resamples=1000, seed=0)
    assert r.delta == 5.0 and r.value == 16.0 and r.ci_low == r.ci_high == 5.0
    # exact over 32 patterns: among the four ordinary pairs only "none swapped" and "all swapped" keep a
    # median gap of 5; the outlier pair (50, 55) sits above both medians whichever way it goes: 2 x 2 of 32
    assert r.p_value == pytest.approx(4 / 32)


def test_holm_hand_worked():
    # sorted 0.01, 0.03, 0.04 -> x3, x2, x1 = 0.03, 0.06, 0.04 -> running max 0.03, 0.06, 0.06
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert stats.holm([]) == []


def test_streamed_blocks_match_the_cached_matrix(monkeypatch):
    """Over CACHED values the resamples are streamed in blocks instead of held as one matrix: same draws."""
    rng = np.random.default_rng(9)
    a, b = rng.random(3000), rng.random(3000)
    monkeypatch.setattr(stats, "BLOCK", 9_000)  # 3 resamples per block
    monkeypatch.setattr(stats, "CACHED", 9_000)
    stats._weights.cache_clear()
    streamed = stats.paired(a, b, resamples=300, seed=2)
    monkeypatch.setattr(stats, "CACHED", 10**7)  # one cached matrix built from the same blocks
    stats._weights.cache_clear()
    monkeypatch.setattr(stats, "_block_rows", lambda n: 3)
    whole = stats.paired(a, b, resamples=300, seed=2)
    stats._weights.cache_clear()
    assert whole.p_value == streamed.p_value
    assert (whole.ci_low, whole.ci_high) == pytest.approx((streamed.ci_low, streamed.ci_high), abs=1e-12)


@pytest.mark.parametrize("a,b,message", [
    ([], [], "non-zero length"),
    ([1.0, 2.0], [1.0], "same non-zero length"),
])
def test_bad_samples(a, b, message):
    with pytest.raises(ValueError, match=message):
        stats.paired(a, b)
