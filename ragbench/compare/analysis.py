"""The whole comparison of a set of runs (statistics and taxonomy), and its report on a sweep's parent run."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragbench.compare.comparison import Comparison, compare, pair_up
from ragbench.compare.metrics import DEFAULTS, OPTIONAL_DEFAULTS, default_metrics, metric_spec
from ragbench.compare.runcases import RunCases
from ragbench.compare.taxonomy import Taxonomy, taxonomy
from ragbench.errors import ConfigError

log = logging.getLogger(__name__)


def analyse(runs: Sequence[RunCases], *, metrics: Sequence[str] = (), baseline: str | None = None,
            baseline_runs: Sequence[RunCases] = (), resamples: int = 2000, seed: int = 0, alpha: float = 0.05,
            notes: Sequence[str] = ()) -> tuple[Comparison, list[Taxonomy]]:
    """Runs against their baselines on ``metrics`` (the defaults when empty), and each run's taxonomy."""
    available = {k for r in (*runs, *baseline_runs) for k in r.fields}
    names = list(dict.fromkeys(metrics)) or default_metrics(available)
    if not metrics:
        absent = [m for m in DEFAULTS if m not in names and m not in OPTIONAL_DEFAULTS]
        if absent:
            notes = [*notes, f"default metrics no run has per-case values of, left out: {', '.join(absent)}"]
    specs = [metric_spec(m) for m in names]
    unknown = [s.name for s in specs if s.key not in available]
    if metrics and unknown:
        near = sorted(k for k in available if k.rsplit("/", 1)[-1] in {u.rsplit("/", 1)[-1] for u in unknown})
        hint = ", ".join(near[:5]) or "answer/f1, retrieval/hit_at_5, retrieval/mrr_at_10, context/tokens, latency/generate_p50_ms"
        raise ConfigError(f"--metric {', '.join(unknown)}: no per-case field of that name in the runs' cases.jsonl; "
                          f"use e.g. {hint}")
    baseline_of, how = pair_up(runs, specs[0], baseline=baseline, baseline_runs=baseline_runs)
    comp = compare(runs, baseline_of, specs, resamples=resamples, seed=seed, alpha=alpha, notes=[*notes, *how])
    return comp, [taxonomy(r) for r in runs]


def log_sweep_report(tracker: Any, parent_run_id: str, *, resamples: int = 2000) -> None:
    """Compares the FINISHED jobs of a sweep (defaults: metrics, baseline per dataset) and logs the report
    (``report.html`` with its drill-down, ``report.md``), the JSON and the plots under ``compare/`` on the
    sweep's parent run, for the MLflow UI."""
    from ragbench.compare.html_data import load_records, run_tags
    from ragbench.compare.report import write_report
    from ragbench.compare.select import find_runs, load_cases

    client = tracker.client
    found, notes = find_runs(client, tracker.uri, tracker.experiment, sweep=parent_run_id)
    runs = [load_cases(client, r) for r in found]
    comp, taxa = analyse(runs, resamples=resamples, notes=notes)
    with tempfile.TemporaryDirectory(prefix="ragbench-compare-") as tmp:
        write_report(Path(tmp), comp, taxa, records=load_records(client, found), tags=run_tags(found))
        client.log_artifacts(parent_run_id, tmp, artifact_path="compare")
    log.info("comparison report logged to the sweep run %s under compare/", parent_run_id)
