"""Agreement statistics: hand-worked accuracy, kappa and confusion matrix, equal to scikit-learn's."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from sklearn.metrics import confusion_matrix as sk_confusion

from ragbench.judge.agreement import agreement, confusion, kappa_from_confusion, mean_ci

# 10 items: human labels and judge verdicts, hand-worked:
#   confusion (rows human 0/1, columns judge 0/1) = [[3, 1], [2, 4]]
#   p_o = (3 + 4) / 10 = 0.7
#   marginals: human 0: 4, human 1: 6; judge 0: 5, judge 1: 5
#   p_e = (4*5 + 6*5) / 100 = 0.5  ->  kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
HUMAN = [0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
JUDGE = [0, 0, 0, 1, 0, 0, 1, 1, 1, 1]
TYPES = ["a", "a", "b", "b", "a", "a", "b", "b", "b", "b"]


def test_hand_worked_values_and_scikit_learn():
    agr = agreement("faithfulness", HUMAN, JUDGE, TYPES, resamples=500)
    assert agr.confusion == ((3, 1), (2, 4))
    assert agr.confusion == tuple(tuple(r) for r in sk_confusion(HUMAN, JUDGE).tolist())
    assert agr.accuracy.value == pytest.approx(0.7)
    assert agr.kappa.value == pytest.approx(0.4)
    assert agr.kappa.value == pytest.approx(cohen_kappa_score(HUMAN, JUDGE))
    assert float(kappa_from_confusion(np.array(agr.confusion))) == pytest.approx(0.4)
    assert agr.kappa.low <= agr.kappa.value <= agr.kappa.high
    assert agr.accuracy.low <= 0.7 <= agr.accuracy.high


def test_by_type_hand_worked():
    agr = agreement("faithfulness", HUMAN, JUDGE, TYPES, resamples=200)
    # type a: human [0,0,1,1], judge [0,0,0,0] -> accuracy 0.5; p_o 0.5, p_e (2*4 + 2*0)/16 = 0.5 -> kappa 0
    assert agr.by_type["a"].n == 4
    assert agr.by_type["a"].accuracy == pytest.approx(0.5)
    assert agr.by_type["a"].kappa == pytest.approx(0.0)
    # type b: human [0,0,1,1,1,1], judge [0,1,1,1,1,1] -> accuracy 5/6; kappa as scikit-learn computes it
    assert agr.by_type["b"].accuracy == pytest.approx(5 / 6)
    assert agr.by_type["b"].kappa == pytest.approx(cohen_kappa_score([0, 0, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1]))


def test_a_judge_that_always_agrees_has_kappa_1():
    agr = agreement("faithfulness", HUMAN, HUMAN, TYPES, resamples=300)
    assert agr.kappa.value == 1.0
    assert agr.accuracy.value == 1.0
    assert agr.confusion == ((4, 0), (0, 6))
    assert agr.kappa.low == agr.kappa.high == 1.0


def test_one_class_only_leaves_kappa_undefined_not_a_number_made_up():
    agr = agreement("faithfulness", [1, 1, 1], [1, 1, 1], ["x"] * 3, classes=(0, 1), resamples=200)
    assert agr.accuracy.value == 1.0
    assert math.isnan(agr.kappa.value)
    assert agr.confusion == ((0, 0), (0, 3))


def test_multiclass_matches_scikit_learn_and_vectorised_kappa():
    rng = np.random.default_rng(3)
    human = rng.integers(0, 5, 60).tolist()
    judged = [h if rng.random() < 0.6 else int(rng.integers(0, 5)) for h in human]
    agr = agreement("accuracy", human, judged, ["t"] * 60, classes=range(5), resamples=300)
    assert agr.kappa.value == pytest.approx(cohen_kappa_score(human, judged))
    cm = confusion(human, judged, range(5))
    assert float(kappa_from_confusion(cm)) == pytest.approx(agr.kappa.value)
    stacked = np.stack([cm, np.eye(5, dtype=int) * 3])
    np.testing.assert_allclose(kappa_from_confusion(stacked), [agr.kappa.value, 1.0])


def test_mean_ci_of_a_constant_is_the_constant_and_empty_is_nan():
    ci = mean_ci([0.25] * 10, resamples=200)
    assert (ci.value, ci.low, ci.high) == pytest.approx((0.25, 0.25, 0.25))
    assert math.isnan(mean_ci([], resamples=200).value)


def test_cis_are_deterministic_for_a_seed():
    a = agreement("f", HUMAN, JUDGE, TYPES, resamples=400, seed=5)
    b = agreement("f", HUMAN, JUDGE, TYPES, resamples=400, seed=5)
    assert a.kappa == b.kappa and a.accuracy == b.accuracy
