"""Prediction-powered inference (PPI) of a judge metric's mean: a few human labels of a run's cases and the
judge's scores of all its cases together give an interval for the *true* (human) score.

The estimator is the PPI mean of Angelopoulos, Bates, Fannjiang, Jordan and Zrnic, "Prediction-powered
inference", Science 382 (2023), without power tuning (lambda = 1; ``ppi_py``'s ``ppi_mean_ci(..., lam=1)``):

    theta_PP = mean(f(X~)) - mean(f(X) - Y)
    CI       = theta_PP +/- z_{1 - alpha/2} * sqrt(var(f(X~)) / N + var(f(X) - Y) / n)

with Y the n human labels, f(X) the judge's scores of those n cases, f(X~) its scores of the N other cases
of the run (the labelled cases are left out of X~, so the two means are independent, as the CLT interval
assumes) and the variances with ddof 0, as ``ppi_py``. A run's judge-only estimate, mean(f) over all its
cases with the same CLT interval, is reported beside it. A label applies to the metric of its rubric:
``accuracy`` -> ``judge/accuracy``; a rubric with a ``/`` names the metric itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats as sps

from ragbench.compare.metrics import metric_spec, per_case_key
from ragbench.compare.runcases import RunCases
from ragbench.errors import ConfigError
from ragbench.judge.labels import LabelledItem, load_case_labels

LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A mean and its CLT interval."""

    value: float
    low: float
    high: float


@dataclass(frozen=True)
class PPIResult:
    """One run's judge metric: judge-only and prediction-powered."""

    run: str
    run_name: str
    metric: str
    labelled: int  # n: cases with a human label (and a judge score)
    unlabelled: int  # N: the run's other judged cases
    judge: Estimate  # mean(f) over all n + N cases
    ppi: Estimate
    rectifier: float  # mean(f(X) - Y): how much the judge over-scores the labelled cases

    def json(self) -> dict[str, object]:
        return {"run": self.run, "run_name": self.run_name, "metric": self.metric, "labelled": self.labelled,
                "unlabelled": self.unlabelled, "judge": self.judge.__dict__, "ppi": self.ppi.__dict__,
                "rectifier": self.rectifier}


def _z(level: float) -> float:
    return float(sps.norm.ppf(1 - (1 - level) / 2))


def ppi_mean(y: np.ndarray, yhat: np.ndarray, yhat_unlabelled: np.ndarray, *,
             level: float = LEVEL) -> Estimate:
    """The PPI point estimate and CLT interval of the mean of Y (module docstring)."""
    y, yhat, u = (np.asarray(v, dtype=float) for v in (y, yhat, yhat_unlabelled))
    if len(y) != len(yhat) or len(y) < 2 or len(u) < 2:
        raise ValueError(f"PPI needs >= 2 labelled pairs and >= 2 unlabelled scores, got "
                         f"{len(y)}/{len(yhat)} and {len(u)}")
    point = float(u.mean() - (yhat - y).mean())
    se = math.sqrt(float(u.var()) / len(u) + float((y - yhat).var()) / len(y))
    return Estimate(point, point - _z(level) * se, point + _z(level) * se)


def clt_mean(x: np.ndarray, *, level: float = LEVEL) -> Estimate:
    """The mean and its CLT interval (ddof 0, as the PPI one)."""
    x = np.asarray(x, dtype=float)
    se = float(x.std()) / math.sqrt(len(x))
    return Estimate(float(x.mean()), float(x.mean()) - _z(level) * se, float(x.mean()) + _z(level) * se)


def metric_of(rubric: str) -> str:
    """The per-case metric a label rubric is for (``accuracy`` -> ``judge/accuracy``)."""
    return rubric if "/" in rubric else f"judge/{rubric}"


def _run_of(item: LabelledItem, runs: Sequence[RunCases], path: Path) -> RunCases:
    if item.run is None:
        if len(runs) == 1:
            return runs[0]
        raise ConfigError(f"--ppi {path}, line {item.line}: no 'run', while {len(runs)} runs are compared; "
                          f"fix: name the run of case {item.case!r} (\"run\": its id, id prefix or name)")
    hits = [r for r in runs
            if item.run in (r.run_id, r.name) or (len(item.run) >= 6 and r.run_id.startswith(item.run))]
    if len(hits) != 1:
        known = ", ".join(f"{r.run_id[:8]} ({r.name})" for r in runs)
        raise ConfigError(f"--ppi {path}, line {item.line}: run {item.run!r} matches {len(hits)} of the "
                          f"compared runs; fix: name one of {known}")
    return hits[0]


def ppi_results(path: Path, runs: Sequence[RunCases], *, level: float = LEVEL) -> list[PPIResult]:
    """Per (run, judge metric) the labels of ``path`` cover: the judge-only and the PPI estimate."""
    items = load_case_labels(path)
    grouped: dict[tuple[str, str], dict[str, int]] = {}
    by_id = {r.run_id: r for r in runs}
    for item in items:
        run = _run_of(item, runs, path)
        if item.case not in run.qids:
            raise ConfigError(f"--ppi {path}, line {item.line}: run {run.name or run.run_id} has no case "
                              f"{item.case!r}; fix: use a qid of its cases.jsonl")
        for rubric, label in item.labels.items():
            metric = metric_of(rubric)
            if per_case_key(metric) not in run.fields:
                raise ConfigError(f"--ppi {path}, line {item.line}: label {rubric!r} is for {metric}, which "
                                  f"run {run.name or run.run_id} has no per-case value of; fix: name the "
                                  "rubric after a judge metric (accuracy for judge/accuracy, or the metric's "
                                  "full key)")
            grouped.setdefault((run.run_id, metric), {})[str(item.case)] = label
    out = []
    for (rid, metric), labels in grouped.items():
        run = by_id[rid]
        f = run.values(metric_spec(metric))
        where = {q: i for i, q in enumerate(run.qids)}
        idx = np.array([where[q] for q in labels], dtype=np.int64)
        y = np.array(list(labels.values()), dtype=float)
        scored = np.isfinite(f[idx])
        rest = np.ones(len(f), dtype=bool)
        rest[idx] = False
        unl = f[rest & np.isfinite(f)]
        if scored.sum() < 2 or len(unl) < 2:
            raise ConfigError(f"--ppi {path}: run {run.name or rid}, {metric}: {int(scored.sum())} labelled "
                              f"and {len(unl)} unlabelled judged cases; fix: PPI needs at least 2 of each")
        out.append(PPIResult(run=rid, run_name=run.name, metric=metric, labelled=int(scored.sum()),
                             unlabelled=len(unl), judge=clt_mean(f[np.isfinite(f)], level=level),
                             ppi=ppi_mean(y[scored], f[idx][scored], unl, level=level),
                             rectifier=float((f[idx][scored] - y[scored]).mean())))
    return out
