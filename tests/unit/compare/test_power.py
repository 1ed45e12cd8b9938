"""Power and the minimum detectable effect (ragbench.compare.power): equal to statsmodels' TTestPower, a
detection rate at the MDE equal to the power in simulation, and compare printing it for each comparison
that is not significant."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from rich.console import Console
from scipy import stats as sps

from ragbench import stats
from ragbench.compare import report
from ragbench.compare.analysis import analyse
from ragbench.compare.cli import run as cli_run
from ragbench.compare.comparison import ALL
from ragbench.compare.power import mde, paired_power, power_problem, questions_needed
from tests.unit.compare.synth import rows, run

SIMULATED = 2000  # paired samples per simulation: the detection rate's standard error is 0.009 at power 0.8
TOLERANCE = 0.035  # about 4 standard errors (the draws are seeded: the test is deterministic)


@pytest.mark.parametrize(("n", "alpha", "power"), [(18, 0.05, 0.8), (200, 0.05 / 6, 0.8), (2000, 0.01, 0.9),
                                                   (8, 0.05, 0.5)])
def test_mde_and_questions_equal_statsmodels_ttestpower(n, alpha, power):
    from statsmodels.stats.power import TTestPower  # test-only dependency (the dev extra)

    sd = 0.37
    want = TTestPower().solve_power(nobs=n, alpha=alpha, power=power, alternative="two-sided")
    assert mde(sd, n, alpha, power) == pytest.approx(float(want) * sd, rel=1e-5)  # its solver's tolerance
    assert paired_power(0.05, sd, n, alpha) == pytest.approx(
        TTestPower().power(effect_size=0.05 / sd, nobs=n, alpha=alpha), rel=1e-9)
    need = TTestPower().solve_power(effect_size=0.02 / sd, alpha=alpha, power=power, alternative="two-sided")
    assert questions_needed(sd, 0.02, alpha, power) == math.ceil(float(need))


def test_normal_approximation_is_smaller_at_small_n_and_equal_at_large():
    z = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
    assert mde(1.0, 18, 0.05) > 1.05 * z / math.sqrt(18)  # why the t-based rule: the normal one is too small
    assert mde(1.0, 100_000, 0.05) == pytest.approx(z / math.sqrt(100_000), rel=1e-3)


def test_detection_rate_at_the_mde_is_the_power_t_test():
    rng = np.random.default_rng(43)
    n, alpha, sd = 30, 0.05, 0.2
    effect = mde(sd, n, alpha, 0.8)
    d = rng.normal(effect, sd, size=(SIMULATED, n))
    t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
    rate = float(np.mean(np.abs(t) > sps.t.ppf(1 - alpha / 2, n - 1)))
    assert abs(rate - 0.8) < TOLERANCE, rate
    means = rng.normal(effect / 2, sd, size=(SIMULATED, n)).mean(axis=1)
    half = float(np.mean(np.abs(means) * math.sqrt(n) / sd > sps.norm.ppf(1 - alpha / 2)))
    assert half < 0.5  # at half the MDE the power is well below: the rate measures the effect, not noise


def test_detection_rate_at_the_mde_is_the_power_of_compares_sign_flip_test_on_0_1_scores():
    """compare's own test (a sign-flip randomisation test) on the differences of two 0/1 metrics (hit@5 of two
    runs): d in {-1, 0, 1}. The MDE is from the differences' sd; the rate is the sign-flip test's."""
    rng = np.random.default_rng(7)
    n, alpha, flips = 120, 0.05, 400
    p_change = 0.3  # a case's two values differ with this probability
    sd_null = math.sqrt(p_change)
    effect = mde(sd_null, n, alpha, 0.8)
    up = (p_change + effect) / 2  # P(d = +1) - P(d = -1) = effect; P(d != 0) = p_change
    u = rng.random((SIMULATED, n))
    d = np.where(u < up, 1.0, np.where(u < p_change, -1.0, 0.0))
    signs = np.where(rng.random((flips, n)) < 0.5, -1.0, 1.0)
    null = np.abs(signs @ d.T) / n  # (flips, samples): every randomised mean difference of every sample
    observed = np.abs(d.mean(axis=1))
    p = (1 + np.count_nonzero(null >= observed - 1e-12, axis=0)) / (1 + flips)
    rate = float(np.mean(p < alpha))
    assert abs(rate - 0.8) < TOLERANCE + 0.01, rate  # the sd of d under the effect is a little smaller


def test_edges():
    assert mde(0.0, 10, 0.05) == 0.0  # every difference the same: any non-zero one is seen
    assert mde(0.3, 5, 0.05) == float("inf")  # 5 pairs: the smallest sign-flip p is 2/32 > 0.05
    assert math.isnan(mde(0.3, 1, 0.05))
    assert questions_needed(0.0, 0.01, 0.05) == 6  # the fewest pairs a sign-flip p can pass 0.05 with
    assert power_problem(0.8) is None and "0.05 to 0.999" in str(power_problem(1.0))


def _pair(n: int, shift: float, seed: int) -> list:
    rng = np.random.default_rng(seed)
    base = 0.2 + 0.6 * rng.random(n)
    other = base + rng.normal(shift, 0.05, n)  # within [0, 1]: no clipping to bias the difference
    return [run("base", rows(base)), run("other", rows(other))]


def test_compare_gives_each_not_significant_comparison_its_mde_at_the_holm_level(monkeypatch):
    runs = _pair(18, 0.0, 3)
    comp, taxa = analyse(runs, metrics=["answer/f1", "latency/generate_p50_ms"],
                         baseline="base", resamples=500)
    rec = next(r for r in comp.records if r.run == "other" and r.metric == "answer/f1" and r.type == ALL)
    assert rec.verdict == stats.SAME
    a, b = runs[1].values(comp.metrics[0]), runs[0].values(comp.metrics[0])
    m = sum(1 for r in comp.records if r.type == ALL and r.verdict != "baseline")
    assert rec.mde_alpha == pytest.approx(0.05 / m)
    assert rec.mde == pytest.approx(mde(float(np.std(a - b, ddof=1)), 18, 0.05 / m, 0.8))
    p50 = next(r for r in comp.records
               if r.run == "other" and r.metric.startswith("latency/") and r.type == ALL)
    assert math.isnan(p50.mde)  # a percentile: no t-based MDE
    out = io.StringIO()
    monkeypatch.setattr(report, "console", Console(file=out, width=80, color_system=None, highlight=False))
    report.print_table(comp, taxa)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "minimum detectable effect (power 0.8)" in text
    line = next(x for x in text.splitlines() if x.startswith("#0 retrieval=other") and " f1 " in x)
    assert f"{rec.mde:.4g}" in line


def test_a_significant_comparison_gets_no_mde():
    comp, _ = analyse(_pair(200, 0.1, 4), metrics=["answer/f1"], baseline="base", resamples=500)
    rec = next(r for r in comp.records if r.run == "other" and r.type == ALL)
    assert rec.verdict == stats.BETTER and math.isnan(rec.mde) and rec.diff_sd > 0


def test_power_option_out_of_range_is_one_line(capsys):
    assert cli_run(["--power", "1.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--power 1.5" in err[0] and "0.05 to 0.999" in err[0]
