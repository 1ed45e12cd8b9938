"""Prediction-powered intervals (ragbench.compare.ppi): a hand-worked case, the reference implementation's
numbers, labels naming a run's cases, and the terminal table."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from rich.console import Console

from ragbench.compare.analysis import analyse
from ragbench.compare.ppi import clt_mean, ppi_mean, ppi_results
from ragbench.compare.terminal import print_ppi
from ragbench.errors import ConfigError
from ragbench.judge.labels import LabelsError
from tests.unit.compare.synth import rows, run

# Computed with the reference implementation, ppi-python 0.2.3 (`pip install ppi-python`; not a dependency:
# it pulls numba, llvmlite and gdown): ppi_py.ppi_mean_pointestimate(Y, YHAT, UNLABELLED, lam=1) and
# ppi_py.ppi_mean_ci(Y, YHAT, UNLABELLED, alpha=0.05, lam=1) / alpha=0.1 (lam=1: the published PPI mean,
# no power tuning).
Y = [1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1]
YHAT = [1, 1, 1, 1, 0, 1, 0, 0, 1, 1, 1, 1]
UNLABELLED = [1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 1,
              1, 0, 1, 0, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
PPI_PY_POINT = 0.66666667
PPI_PY_95 = (0.35712804, 0.9762053)
PPI_PY_90 = (0.40689366, 0.92643967)


def test_hand_worked():
    # mean(f~) = 3/4; mean(f - Y) = (0 + 1) / 2 = 1/2; theta = 1/4. var(f~) = 3/16 over N = 4;
    # var(Y - f) = 1/4 over n = 2: se = sqrt(3/64 + 1/8) = sqrt(11/64); z = 1.959964
    got = ppi_mean(np.array([1, 0]), np.array([1, 1]), np.array([1, 0, 1, 1]))
    se = math.sqrt(11 / 64)
    assert got.value == pytest.approx(0.25)
    assert (got.low, got.high) == pytest.approx((0.25 - 1.959964 * se, 0.25 + 1.959964 * se), rel=1e-6)


def test_equals_the_reference_implementation():
    got = ppi_mean(np.array(Y), np.array(YHAT), np.array(UNLABELLED))
    assert got.value == pytest.approx(PPI_PY_POINT, abs=1e-8)
    assert (got.low, got.high) == pytest.approx(PPI_PY_95, abs=1e-8)
    at90 = ppi_mean(np.array(Y), np.array(YHAT), np.array(UNLABELLED), level=0.90)
    assert (at90.low, at90.high) == pytest.approx(PPI_PY_90, abs=1e-8)


def _runs() -> list:
    out = []
    for rid, shift in (("a", 0.0), ("b", 0.1)):
        data = rows(np.linspace(0.1, 0.9, 60), prefix="q")
        for i, row in enumerate(data):
            row["judge/accuracy"] = float((i * 7 + int(shift * 10)) % 10 < 7)  # the judge passes ~70%
        out.append(run(rid, data, name=f"#{rid} topk={rid}"))
    return out


def _labels(tmp_path, items) -> object:
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(json.dumps(i) for i in items) + "\n", encoding="utf-8")
    return path


def test_labels_naming_a_run_and_case_give_the_run_its_ppi_estimate(tmp_path, monkeypatch):
    runs = _runs()
    # the human disagrees with the judge on 4 of 12 labelled cases of run b, where the judge passed them
    items = [{"run": "b", "case": f"q{i}", "labels": {"accuracy": 0 if i % 3 == 0 else
                                                      int(runs[1].fields["judge/accuracy"][i])}}
             for i in range(12)]
    (res,) = ppi_results(_labels(tmp_path, items), runs)
    f = runs[1].fields["judge/accuracy"]
    y = np.array([i["labels"]["accuracy"] for i in items], dtype=float)
    want = ppi_mean(y, f[:12], f[12:])
    assert res.run == "b" and res.metric == "judge/accuracy" and (res.labelled, res.unlabelled) == (12, 48)
    assert res.ppi == want and res.judge == clt_mean(f)
    assert res.rectifier == pytest.approx(float((f[:12] - y).mean())) and res.rectifier > 0
    assert res.ppi.value < res.judge.value  # the judge over-scores: the human-corrected estimate is lower
    comp, _ = analyse(runs, metrics=["judge/accuracy"], resamples=200)
    out = io.StringIO()
    print_ppi(Console(file=out, width=80, color_system=None, highlight=False), comp, [res])
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert f"{res.ppi.value:.3f}" in text and "12/48" in text and "prediction-powered" in text


@pytest.mark.parametrize(("items", "says"), [
    ([{"case": "q1", "labels": {"accuracy": 1}}], "no 'run', while 2 runs are compared"),
    ([{"run": "zz", "case": "q1", "labels": {"accuracy": 1}}], "run 'zz' matches 0 of the compared runs"),
    ([{"run": "a", "case": "nope", "labels": {"accuracy": 1}}], "has no case 'nope'"),
    ([{"run": "a", "case": "q1", "labels": {"faithfulness": 1}}], "is for judge/faithfulness, which run"),
    ([{"run": "a", "case": "q1", "labels": {"accuracy": 1}}], "1 labelled and 59 unlabelled"),
])
def test_bad_labels_are_one_line_naming_the_fix(tmp_path, items, says):
    with pytest.raises(ConfigError, match="fix") as err:
        ppi_results(_labels(tmp_path, items), _runs())
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_case_label_needs_its_case_and_is_given_once(tmp_path):
    with pytest.raises(LabelsError, match="no 'case'"):
        ppi_results(_labels(tmp_path, [{"run": "a", "labels": {"accuracy": 1}}]), _runs())
    twice = [{"run": "a", "case": "q1", "labels": {"accuracy": 1}}] * 2
    with pytest.raises(LabelsError, match="also on line 1"):
        ppi_results(_labels(tmp_path, twice), _runs())
