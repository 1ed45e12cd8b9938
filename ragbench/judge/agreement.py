"""Agreement of a judge's verdicts with human labels: accuracy, Cohen's kappa, confusion matrix, bootstrap CIs.

Cohen's kappa is scikit-learn's ``cohen_kappa_score`` (unweighted): ``(p_o - p_e) / (1 - p_e)`` with
``p_o`` the observed agreement and ``p_e`` the agreement expected from the two raters' marginals. The
bootstrap resamples items with replacement and recomputes kappa from each resample's confusion matrix
(vectorised; the point value is scikit-learn's, the CI the percentile interval of the resamples).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ragbench.stats import bootstrap_ci


@dataclass(frozen=True)
class Interval:
    """A statistic and its percentile bootstrap CI (NaN bounds when undefined, e.g. one class only)."""

    value: float
    low: float
    high: float

    def excludes(self, x: float) -> bool:
        """True when the CI lies wholly above or below ``x``."""
        return bool(self.low > x or self.high < x)


@dataclass(frozen=True)
class TypeAgreement:
    """Agreement on the items of one question type (no CI: types are often a handful of items)."""

    n: int
    accuracy: float
    kappa: float


@dataclass(frozen=True)
class Agreement:
    """A judge against human labels on one rubric."""

    rubric: str
    n: int
    classes: tuple[int, ...]
    accuracy: Interval
    kappa: Interval
    confusion: tuple[tuple[int, ...], ...]  # rows: human label, columns: judge verdict, in ``classes`` order
    by_type: Mapping[str, TypeAgreement]


def kappa_from_confusion(cm: np.ndarray) -> np.ndarray:
    """Cohen's kappa of confusion matrices (..., k, k); NaN where chance agreement is 1 (one class only)."""
    cm = np.asarray(cm, dtype=float)
    n = cm.sum(axis=(-2, -1))
    po = np.trace(cm, axis1=-2, axis2=-1) / n
    pe = (cm.sum(axis=-1) * cm.sum(axis=-2)).sum(axis=-1) / n**2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(pe < 1.0, (po - pe) / (1.0 - pe), np.nan)


def confusion(human: Sequence[int], judged: Sequence[int], classes: Sequence[int]) -> np.ndarray:
    """Counts of (human label, judge verdict) pairs; rows and columns in ``classes`` order."""
    index = {c: i for i, c in enumerate(classes)}
    k = len(classes)
    codes = np.array([index[h] * k + index[j] for h, j in zip(human, judged, strict=True)], dtype=np.int64)
    return np.bincount(codes, minlength=k * k).reshape(k, k)


def _kappa_ci(codes: np.ndarray, k: int, *, resamples: int, seed: int, level: float) -> tuple[float, float]:
    n = len(codes)
    rng = np.random.default_rng([seed, n, 7])
    kappas = []
    step = max(1, 2_000_000 // max(n, 1))
    for lo in range(0, resamples, step):
        rows = min(step, resamples - lo)
        idx = rng.integers(0, n, size=(rows, n))
        flat = (codes[idx] + np.arange(rows)[:, None] * k * k).ravel()
        cms = np.bincount(flat, minlength=rows * k * k).reshape(rows, k, k)
        kappas.append(kappa_from_confusion(cms))
    values = np.concatenate(kappas)
    if np.all(np.isnan(values)):
        return float("nan"), float("nan")
    tail = (1.0 - level) / 2.0
    low, high = np.nanquantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def mean_ci(x: Sequence[float] | np.ndarray, *, resamples: int = 2000, seed: int = 0,
            level: float = 0.95) -> Interval:
    """The mean of ``x`` with its percentile bootstrap CI (``ragbench.stats.bootstrap_ci``)."""
    arr = np.asarray(x, dtype=float)
    if len(arr) == 0:
        return Interval(float("nan"), float("nan"), float("nan"))
    low, high = bootstrap_ci(arr, np.zeros_like(arr), resamples=resamples, seed=seed, level=level)
    return Interval(float(arr.mean()), low, high)


def agreement(rubric: str, human: Sequence[int], judged: Sequence[int], types: Sequence[str], *,
              classes: Sequence[int] | None = None, resamples: int = 2000, seed: int = 0,
              level: float = 0.95) -> Agreement:
    """Accuracy, kappa (scikit-learn) and the confusion matrix of ``judged`` against ``human``, with CIs."""
    from sklearn.metrics import cohen_kappa_score

    if not len(human) == len(judged) == len(types) or not human:
        raise ValueError(f"rubric {rubric}: need as many verdicts as labels (>0), got {len(human)} and {len(judged)}")
    labels = tuple(sorted(set(classes or ()) | set(human) | set(judged)))
    k = len(labels)
    index = {c: i for i, c in enumerate(labels)}
    codes = np.array([index[h] * k + index[j] for h, j in zip(human, judged, strict=True)], dtype=np.int64)
    cm = np.bincount(codes, minlength=k * k).reshape(k, k)
    agree = (np.asarray(human) == np.asarray(judged)).astype(float)
    # one class used by both raters: chance agreement is 1 and kappa undefined (scikit-learn warns, then NaN)
    defined = bool(np.isfinite(kappa_from_confusion(cm)))
    kappa = float(cohen_kappa_score(human, judged, labels=list(labels))) if defined else float("nan")
    low, high = _kappa_ci(codes, k, resamples=resamples, seed=seed, level=level)
    by_type: dict[str, TypeAgreement] = {}
    for t in sorted(set(types)):
        mask = np.asarray(types) == t
        sub = confusion(np.asarray(human)[mask].tolist(), np.asarray(judged)[mask].tolist(), labels)
        by_type[t] = TypeAgreement(n=int(mask.sum()), accuracy=float(agree[mask].mean()),
                                   kappa=float(kappa_from_confusion(sub)))
    return Agreement(rubric=rubric, n=len(human), classes=labels,
                     accuracy=mean_ci(agree, resamples=resamples, seed=seed, level=level),
                     kappa=Interval(kappa, low, high), confusion=tuple(tuple(int(c) for c in row) for row in cm),
                     by_type=by_type)
