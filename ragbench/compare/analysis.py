"""The whole comparison of a set of runs (statistics and taxonomy), and its report on a sweep's parent run."""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ragbench.compare.comparison import Comparison, compare, pair_up
from ragbench.compare.html_data import load_records, run_tags
from ragbench.compare.metrics import (
    DEFAULTS,
    OPTIONAL_DEFAULTS,
    MinEffect,
    default_metrics,
    metric_spec,
    per_case_key,
    with_min_effect,
)
from ragbench.compare.power import DEFAULT_POWER
from ragbench.compare.report import write_report
from ragbench.compare.runcases import RunCases
from ragbench.compare.select import find_runs, load_cases
from ragbench.compare.taxonomy import Taxonomy, taxonomy
from ragbench.errors import ConfigError
from ragbench.record import REUSED_FROM
from ragbench.tracking.runs_table import AUTO, ranking_metric

log = logging.getLogger(__name__)
REPORT_KEY = "ragbench.report_key"  # what a sweep's report was computed from (see report_key)
REPORT_FROM = "ragbench.report_copied_from"
REPORT_FORMAT = 3  # bump when the report's content changes, so no older report is copied


def analyse(runs: Sequence[RunCases], *, metrics: Sequence[str] = (), baseline: str | None = None,
            baseline_runs: Sequence[RunCases] = (), resamples: int = 2000, seed: int = 0, alpha: float = 0.05,
            notes: Sequence[str] = (), min_effects: Mapping[str, MinEffect] | None = None, sort_by: str = AUTO,
            power: float = DEFAULT_POWER) -> tuple[Comparison, list[Taxonomy]]:
    """Runs against their baselines on ``metrics`` (the defaults when empty), and each run's taxonomy.
    ``min_effects``: practical thresholds given by ``--min-effect``, by metric name (the others: MIN_EFFECTS);
    ``sort_by``: the sweep table's ``sort_by`` (the default baseline is its best configuration);
    ``power``: the power of each not-significant comparison's minimum detectable effect (``ragbench.compare.power``)."""
    available = {k for r in (*runs, *baseline_runs) for k in r.fields}
    names = list(dict.fromkeys(metrics)) or default_metrics(available)
    if not metrics:
        absent = [m for m in DEFAULTS if m not in names and m not in OPTIONAL_DEFAULTS]
        if absent:
            notes = [*notes, f"default metrics no run has per-case values of, left out: {', '.join(absent)}"]
    given = dict(min_effects or {})
    stray = [m for m in given if m not in names]
    if stray:
        raise ConfigError(f"--min-effect {', '.join(stray)}: not a compared metric; compared: {', '.join(names)} "
                          "(add it with --metric, or name one of these)")
    unknown = [m for m in names if per_case_key(m) not in available]
    if metrics and unknown:
        near = sorted(k for k in available if k.rsplit("/", 1)[-1] in {u.rsplit("/", 1)[-1] for u in unknown})
        hint = ", ".join(near[:5]) or "answer/f1, retrieval/hit_at_5, retrieval/mrr_at_10, context/tokens, latency/generate_p50_ms"
        raise ConfigError(f"--metric {', '.join(unknown)}: no per-case field of that name in the runs' cases.jsonl; "
                          f"use e.g. {hint}")
    specs = [with_min_effect(metric_spec(m), given) for m in names]  # each named key's declaration
    # the sweep table's rule (one "best" per sweep): on the runs' logged metrics, else their per-case fields
    rows = [{**dict.fromkeys(r.fields, 0.0), **r.metrics, "baseline": r.baseline} for r in runs]
    rank_by = ranking_metric(rows, sort_by)
    if not any(rank_by in row for row in rows):  # runs of another kind (a judge's calibration): the first metric
        rank_by = specs[0].name
    baseline_of, how = pair_up(runs, rank_by, baseline=baseline, baseline_runs=baseline_runs)
    comp = compare(runs, baseline_of, specs, resamples=resamples, seed=seed, alpha=alpha,
                   notes=[*notes, *how], power=power)
    return replace(comp, rank_by=rank_by), [taxonomy(r) for r in runs]


def log_sweep_report(tracker: Any, parent_run_id: str, *, resamples: int = 2000, sort_by: str = AUTO) -> None:
    """Compares the FINISHED jobs of a sweep (defaults: metrics, baseline per dataset) and logs the report
    (``report.html`` with its drill-down, ``report.md``), the JSON and the plots under ``compare/`` on the
    sweep's parent run, for the MLflow UI."""
    client = tracker.client
    found, notes = find_runs(client, tracker.uri, tracker.experiment, sweep=parent_run_id)
    key = report_key(found, resamples)
    with tempfile.TemporaryDirectory(prefix="ragbench-compare-") as tmp:
        earlier = _earlier_report(tracker, key, parent_run_id)
        if earlier is not None:  # every job resumed from the same runs: the same report, copied, not recomputed
            client.download_artifacts(earlier, "compare", tmp)
            client.log_artifacts(parent_run_id, str(Path(tmp) / "compare"), artifact_path="compare")
            tracker.set_tags(parent_run_id, {REPORT_KEY: key, REPORT_FROM: earlier})
            log.info("comparison report of sweep run %s (the same runs) copied to the sweep run %s under compare/",
                     earlier, parent_run_id)
            return
        write_sweep_report(Path(tmp), client, found, notes=notes, resamples=resamples, sort_by=sort_by)
        client.log_artifacts(parent_run_id, tmp, artifact_path="compare")
    tracker.set_tags(parent_run_id, {REPORT_KEY: key})
    log.info("comparison report logged to the sweep run %s under compare/", parent_run_id)


def write_sweep_report(folder: Path, client: Any, found: Sequence[Any], *, notes: Sequence[str] = (),
                       resamples: int = 2000, sort_by: str = AUTO) -> list[Path]:
    """The report files of the MLflow runs ``found`` (``find_runs``) in ``folder``: what ``log_sweep_report``
    logs under ``compare/``; returns the files written."""
    runs = [load_cases(client, r) for r in found]
    comp, taxa = analyse(runs, resamples=resamples, notes=notes, sort_by=sort_by)
    return write_report(folder, comp, taxa, records=load_records(client, found, runs), tags=run_tags(found))


def report_key(found: Sequence[Any], resamples: int) -> str:
    """The identity of a sweep's report: each compared job's name and the run that ran it (a resumed job's
    copy names its origin in ``ragbench.reused_from``), the resamples and the report format. A rerun whose
    jobs all resumed has the key of the sweep it resumed from."""
    jobs = sorted((r.info.run_name or "", r.data.tags.get(REUSED_FROM) or r.info.run_id) for r in found)
    return hashlib.sha256(json.dumps([REPORT_FORMAT, resamples, jobs]).encode()).hexdigest()



def _earlier_report(tracker: Any, key: str, parent_run_id: str) -> str | None:
    """A FINISHED sweep run holding the report of ``key``, or None."""
    for run in tracker.runs_with_tag(REPORT_KEY, key):
        if run.info.run_id != parent_run_id and run.info.status == "FINISHED":
            return str(run.info.run_id)
    return None
