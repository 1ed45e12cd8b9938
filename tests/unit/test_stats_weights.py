"""The cached resample matrices (stats._weights) against their definition, draw by draw."""

import numpy as np
import pytest

from ragbench import stats


@pytest.mark.parametrize("n, resamples", [(7, 50), (1540, 2000), (3000, 2000)])  # 3000: two blocks of draws
def test_bootstrap_weights_are_each_draws_counts_over_n(n, resamples):
    stats.release()
    w, exact = stats._weights("boot", n, resamples, 0)
    draws = np.vstack(list(stats._draws("boot", n, resamples, 0)[0]))
    assert not exact and w.shape == (resamples, n) and not w.flags.writeable
    for i in (0, resamples // 2, resamples - 1):
        assert np.array_equal(w[i], np.bincount(draws[i], minlength=n) / n)


@pytest.mark.parametrize("n, resamples", [(5, 2000), (300, 2000)])  # 5: every sign pattern (exact)
def test_swap_weights_are_the_signs_over_n(n, resamples):
    stats.release()
    w, exact = stats._weights("swap", n, resamples, 0)
    swaps = np.vstack(list(stats._draws("swap", n, resamples, 0)[0]))
    assert exact == (n == 5) and w.shape == swaps.shape
    assert np.array_equal(w, np.where(swaps, -1.0, 1.0) / n)


def test_the_mean_difference_by_weights_is_the_resampled_means():
    rng = np.random.default_rng(3)
    a, b = rng.random(400), rng.random(400)
    deltas, _ = stats._resampled("boot", a, b, stats.mean, 300, 0)
    draws = np.vstack(list(stats._draws("boot", 400, 300, 0)[0]))
    assert np.allclose(deltas, a[draws].mean(axis=1) - b[draws].mean(axis=1), rtol=0, atol=1e-12)
