"""``python -m ragbench plan=true plan.pilot=RUN_ID plan.detect=0.02``: how many questions a comparison
needs to detect a difference of ``plan.detect``, from the paired variance of a pilot.

The pilot is a sweep's parent run (its jobs, each paired with the best configuration of its dataset on the
metric, as ``ragbench.compare`` pairs them), several job runs (``plan.pilot=A,B,C``: each paired with the
first), or one job run. With pairs, the sd of the per-case differences is measured; with one run only the
sd of its scores s is, and the paired sd is taken as s * sqrt(2), the bound for two configurations whose
per-case scores are not negatively correlated (paired scores usually correlate, so it overstates the need).
The sample size is the paired t-test's (``ragbench.compare.power.questions_needed``) at level
``plan.alpha`` / ``plan.comparisons`` (Holm's worst case over that many comparisons) and power
``plan.power``. Nothing is run.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragbench.compare.comparison import alpha_problem, pair_up
from ragbench.compare.metrics import metric_spec, per_case_key
from ragbench.compare.power import (
    DEFAULT_POWER,
    MAX_QUESTIONS,
    difference_sd,
    mde,
    power_problem,
    questions_needed,
)
from ragbench.compare.runcases import RunCases
from ragbench.compare.select import find_runs, load_cases, open_store
from ragbench.errors import ConfigError, RagbenchError, coded
from ragbench.tracking.run_names import job_labels
from ragbench.tracking.store import os_reason, tracking_defaults

KEYS = ("plan.pilot", "plan.detect", "plan.power", "plan.alpha", "plan.metric", "plan.comparisons")
DEFAULT_METRICS = ("answer/f1", "retrieval/mrr_at_10")  # the sweep table's ranking metrics, in that order


@dataclass(frozen=True)
class Need:
    """One pilot comparison and the questions it needs."""

    dataset: str
    run: str
    baseline: str  # "" for a single run (the paired sd is its sd * sqrt(2))
    pilot_n: int
    diff_sd: float
    mde_at_pilot: float
    questions: int  # MAX_QUESTIONS + 1: more than that


def is_pilot_arg(arg: str) -> bool:
    """Whether a command-line argument is one of this planner's keys (``plan.pilot=...``)."""
    return arg.split("=", 1)[0] in KEYS


def split_pilot_args(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """({key: value} of the ``plan.pilot`` family, the other arguments)."""
    given: dict[str, str] = {}
    rest = []
    for arg in argv:
        if is_pilot_arg(arg):
            key, value = arg.split("=", 1)
            given[key.split(".", 1)[1]] = value.strip()
        else:
            rest.append(arg)
    return given, rest


def _number(given: dict[str, str], key: str, default: float | None, what: str) -> float:
    text = given.get(key)
    if text is None:
        if default is None:
            raise ConfigError(f"plan.{key} is missing; fix: give {what}, e.g. plan.{key}=0.02")
        return default
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"plan.{key}={text}: not a number; fix: give {what}") from None
    if not math.isfinite(value):
        raise ConfigError(f"plan.{key}={text}: not a finite number; fix: give {what}")
    return value


def options(given: dict[str, str]) -> dict[str, Any]:
    """The checked options; a ConfigError naming the key and the fix."""
    if not given.get("pilot"):
        raise ConfigError("plan.pilot is missing; fix: give a sweep's parent run id, job run ids "
                          "(plan.pilot=A,B) or one job run id, as `python -m ragbench.compare` lists them")
    stray = sorted(set(given) - {"pilot", "detect", "power", "alpha", "metric", "comparisons"})
    if stray:
        raise ConfigError(f"plan.{stray[0]}: unknown; use {', '.join(KEYS)}")
    detect = _number(given, "detect", None, "the difference to detect, in the metric's units (> 0)")
    if detect <= 0:
        raise ConfigError(f"plan.detect={given['detect']}: use a difference > 0 in the metric's units, "
                          "e.g. plan.detect=0.02 for 2 points of F1")
    power = _number(given, "power", DEFAULT_POWER, "a power from 0.05 to 0.999")
    if (problem := power_problem(power)) is not None:
        raise ConfigError(f"plan.{problem}")
    alpha = _number(given, "alpha", 0.05, "a significance level, e.g. 0.05")
    if (problem := alpha_problem(alpha)) is not None:
        raise ConfigError(f"plan.alpha: {problem.split(': ', 1)[1]}")
    comparisons = _number(given, "comparisons", 1, "the number of comparisons Holm corrects over (>= 1)")
    if comparisons < 1 or comparisons != int(comparisons):
        raise ConfigError(f"plan.comparisons={given['comparisons']}: use a whole number >= 1 (the "
                          "comparisons Holm corrects over: runs x metrics)")
    return {"pilot": [p for p in given["pilot"].split(",") if p], "detect": detect, "power": power,
            "alpha": alpha, "comparisons": int(comparisons), "metric": given.get("metric")}


def _metric(runs: Sequence[RunCases], name: str | None) -> str:
    have = {k for r in runs for k in r.fields}
    if name:
        if per_case_key(name) not in have:
            raise ConfigError(f"plan.metric={name}: no per-case field of that name in the pilot's cases; "
                              f"use e.g. {', '.join(m for m in DEFAULT_METRICS if m in have) or 'answer/f1'}")
        return name
    for m in DEFAULT_METRICS:
        if m in have:
            return m
    raise ConfigError("the pilot's cases hold neither answer/f1 nor retrieval/mrr_at_10; fix: name the "
                      "metric with plan.metric=<a per-case key of cases.jsonl>")


def needs(runs: Sequence[RunCases], opts: dict[str, Any], *,
          first_is_baseline: bool) -> tuple[str, list[Need]]:
    """The metric and, per pilot comparison, the questions needed to detect ``opts['detect']``."""
    metric = _metric(runs, opts["metric"])
    spec = metric_spec(metric)
    level = opts["alpha"] / opts["comparisons"]
    out: list[Need] = []
    if len(runs) == 1:
        x = runs[0].values(spec)
        x = x[np.isfinite(x)]
        sd = float(np.std(x, ddof=1)) * math.sqrt(2) if len(x) >= 2 else float("nan")
        pairs: list[tuple[RunCases, RunCases | None, int, float]] = [(runs[0], None, len(x), sd)]
    else:
        if first_is_baseline:
            base_of = {r.run_id: runs[0] for r in runs}
        else:
            base_of, _ = pair_up(runs, metric)
        pairs = []  # (run, its baseline, shared scored cases, sd of the differences)
        for r in runs:
            base = base_of[r.run_id]
            if base is r:
                continue
            where = {q: i for i, q in enumerate(base.qids)}
            ia = [i for i, q in enumerate(r.qids) if q in where]
            a, b = r.values(spec)[ia], base.values(spec)[[where[r.qids[i]] for i in ia]]
            ok = np.isfinite(a) & np.isfinite(b)
            pairs.append((r, base, int(ok.sum()), difference_sd(a[ok], b[ok])))
    for run, against, n, sd in pairs:
        if not (n >= 2 and math.isfinite(sd)):
            raise ConfigError(f"pilot run {run.run_id}: {n} case(s) with {metric} shared with its baseline; "
                              "fix: a pilot of at least 2 scored cases per run")
        versus = (against.name or against.run_id) if against is not None else ""
        out.append(Need(dataset=run.dataset, run=run.name or run.run_id, baseline=versus, pilot_n=n,
                        diff_sd=sd,
                        mde_at_pilot=mde(sd, n, level, opts["power"]),
                        questions=questions_needed(sd, opts["detect"], level, opts["power"])))
    return metric, out


def load_pilot(ids: Sequence[str]) -> tuple[list[RunCases], bool, str]:
    """The pilot's runs, whether the first is every run's baseline (given ids), and what the pilot was."""
    uri, experiment = tracking_defaults()
    client = open_store(uri)
    if len(ids) == 1:
        try:
            run = client.get_run(ids[0])
        except Exception:  # noqa: BLE001 - MLflow raises its own type for an unknown id: read it as a prefix
            run = None
        if run is not None and run.data.tags.get("ragbench.role") == "sweep":
            found, _ = find_runs(client, uri, experiment, sweep=ids[0])
            return [load_cases(client, r) for r in found], False, f"sweep {ids[0]} ({len(found)} jobs)"
    found, _ = find_runs(client, uri, experiment, run_ids=ids)
    what = f"run {ids[0]}" if len(ids) == 1 else f"{len(ids)} runs, the first as baseline"
    return [load_cases(client, r) for r in found], True, what


def render(metric: str, rows: Sequence[Need], opts: dict[str, Any], what: str) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=sys.stdout, width=80)
    level = opts["alpha"] / opts["comparisons"]
    console.print(f"questions needed to detect a difference of {opts['detect']:g} in {metric} with power "
                  f"{opts['power']:g} at level {level:.3g} (two-sided paired t-test; pilot: {escape(what)})")
    table = Table(box=None, pad_edge=False)
    for head in ("run", "pilot n", "sd(diff)", "MDE now", "needed"):
        table.add_column(head, justify="left" if head == "run" else "right", overflow="fold",
                         no_wrap=head != "run")
    short: dict[str, str] = {}  # per dataset, the overrides that differ between its runs (as compare labels)
    for ds in {r.dataset for r in rows}:
        names = {n for r in rows if r.dataset == ds for n in (r.run, r.baseline) if n}
        short.update(job_labels({n: n for n in names}))
    alike = [r for r in rows if r.diff_sd == 0]
    for r in (r for r in rows if r.diff_sd != 0):
        needed = f"> {MAX_QUESTIONS:,}" if r.questions > MAX_QUESTIONS else f"{r.questions:,}"
        now = "none" if r.mde_at_pilot == float("inf") else f"{r.mde_at_pilot:.4g}"
        label = f"{r.dataset}: {short.get(r.run) or r.run}" + (f" vs {short.get(r.baseline) or r.baseline}"
                                                               if r.baseline else " (sd x sqrt 2)")
        table.add_row(escape(label), str(r.pilot_n), f"{r.diff_sd:.4g}", now, needed)
    console.print(table)
    if alike:
        console.print(f"{len(alike)} pilot pair(s) score every case alike (sd 0), left out: "
                      + escape(", ".join(f"{short.get(r.run) or r.run}" for r in alike)))
    if any(not r.baseline for r in rows):
        console.print("one run: the paired sd is taken as its scores' sd x sqrt(2), the bound for two "
                      "configurations whose scores do not correlate negatively; a pilot of two runs "
                      "(plan.pilot=A,B) measures it")


def main(given: dict[str, str], json_path: str | None) -> int:
    """Prints (and with ``plan.json=PATH`` writes) the questions needed; 1 with one line on bad input."""
    try:
        opts = options(given)
        runs, first_is_baseline, what = load_pilot(opts["pilot"])
        metric, rows = needs(runs, opts, first_is_baseline=first_is_baseline)
    except RagbenchError as exc:
        print(f"ragbench plan: {coded(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:
        from mlflow.exceptions import MlflowException  # imported by then: the store was opened

        if not isinstance(exc, MlflowException):
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        print(f"ragbench plan: the MLflow store failed: {first[:300]}; fix: run in the folder the pilot "
              "ran in",
              file=sys.stderr)
        return 1
    render(metric, rows, opts, what)
    if json_path:
        doc = {"metric": metric, "pilot": what, **{k: v for k, v in opts.items() if k != "pilot"},
               "level": opts["alpha"] / opts["comparisons"], "rows": [asdict(r) for r in rows]}
        try:
            Path(json_path).parent.mkdir(parents=True, exist_ok=True)
            Path(json_path).write_text(json.dumps(doc, indent=1, allow_nan=True), encoding="utf-8")
        except OSError as exc:
            print(f"ragbench plan: cannot write plan.json={json_path} ({os_reason(Path(json_path), exc)}); "
                  "fix: name a file in a writable folder", file=sys.stderr)
            return 1
    return 0
