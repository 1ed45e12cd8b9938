"""The comparison command, ``python -m ragbench.compare`` (also ``ragbench compare``): runs against a
baseline, with confidence."""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ragbench.errors import ConfigError, RagbenchError, coded
from ragbench.tracking.store import os_reason, tracking_defaults, writable_folder

if TYPE_CHECKING:
    from ragbench.compare.metrics import MinEffect

for _key, _value in {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1",
                     "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}.items():
    os.environ.setdefault(_key, _value)

PASS, REGRESSION, USAGE, INTERRUPTED = 0, 1, 2, 130
MAX_RESAMPLES = 1_000_000  # each resample is a pass over every case of every run, metric and type

EPILOG = """\
exit codes:
  0  done; with --fail-on-regression: no selected metric is significantly worse than its baseline
  1  --fail-on-regression: some metric is worse (Holm-adjusted p < alpha and |delta| at least its practical
     threshold, see --min-effect) by more than --tolerance
  2  usage error (bad option, unknown run or metric, runs on different datasets or sharing no case,
     an output path that cannot be written)
  130  interrupted (Ctrl-C)

examples:
  python -m ragbench.compare                                   # the latest sweep, best run as baseline
  python -m ragbench.compare --sweep 1f2e... --metric answer/f1 --metric retrieval/mrr_at_10 --report out/
  python -m ragbench.compare --runs RUN_A RUN_B --baseline RUN_A --json cmp.json
  python -m ragbench.compare --min-effect answer/f1=0.02 --min-effect latency/generate_p50_ms=10%
  python -m ragbench.compare --filter "params.dataset.name = 'locomo'"
  python -m ragbench.compare --save-baseline ci/baseline.json          # commit it
  python -m ragbench.compare --baseline-file ci/baseline.json --fail-on-regression --tolerance 0.01
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ragbench.compare", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Compare ragbench runs against a baseline, per metric and question type, over the cases "
                    "they share: paired delta, bootstrap CI, sign-flip randomisation p-value (Holm-corrected), "
                    "verdict; a failure taxonomy per run; a CI gate.")
    store = p.add_argument_group("store")
    store.add_argument("--tracking-uri", help="MLflow store (default: tracking.uri of conf/tracking/mlflow.yaml, "
                                              "as jobs use: sqlite:///mlruns/mlflow.db; or http://host:5000)")
    store.add_argument("--experiment", help="MLflow experiment (default: the jobs' tracking.experiment)")
    sel = p.add_argument_group("which runs").add_mutually_exclusive_group()
    sel.add_argument("--sweep", metavar="PARENT_RUN_ID", help="the jobs of this sweep (default: the latest sweep)")
    sel.add_argument("--runs", nargs="+", metavar="RUN_ID", help="these runs (ids, or unique id prefixes)")
    sel.add_argument("--filter", metavar="MLFLOW_FILTER", help="job runs matching an MLflow filter string")
    base = p.add_argument_group("baseline").add_mutually_exclusive_group()
    base.add_argument("--baseline", metavar="RUN", help="the reference run (id, id prefix or run name); default: "
                                                        "per dataset, the best configuration on the sweep table's "
                                                        "ranking metric (answer/f1, else retrieval/mrr_at_10); "
                                                        "never a retrieval=oracle|none baseline run")
    base.add_argument("--baseline-file", type=Path, metavar="PATH",
                      help="compare against the runs saved in this file (written by --save-baseline), "
                           "matched by dataset and config")
    stat = p.add_argument_group("statistics")
    stat.add_argument("--metric", action="append", default=[], metavar="NAME",
                      help="repeatable; a per-case key of cases.jsonl (answer/f1, retrieval/mrr_at_10, context/tokens, ...) "
                           "or latency/<stage>_p50_ms|_p95_ms; default: answer/f1, judge/accuracy (when present), "
                           "retrieval/hit_at_5, retrieval/mrr_at_10, context/tokens, latency/generate_p50_ms")
    stat.add_argument("--resamples", type=int, default=2000,
                      help=f"bootstrap and randomisation resamples, 100 to {MAX_RESAMPLES:,} (2000)")
    stat.add_argument("--seed", type=int, default=0, help="random seed of the resamples (0)")
    stat.add_argument("--alpha", type=float, default=0.05, help="significance level after Holm (0.05)")
    stat.add_argument("--power", type=float, default=0.8,
                      help="the power of the minimum detectable effect printed for each comparison that is "
                           "not significant, 0.05 to 0.999 (0.8)")
    stat.add_argument("--min-effect", action="append", default=[], metavar="METRIC=VALUE",
                      help="repeatable; the practical threshold of a metric: a significant |delta| below it is "
                           "'no practical difference', not better/worse. VALUE in the metric's units "
                           "(answer/f1=0.02) or a share of the baseline (context/tokens=10%%); 0 turns it off. "
                           "Defaults: 0.01 for scores, max(5 ms, 20%%) for latency, 5%% for tokens and cost")
    stat.add_argument("--ppi", type=Path, metavar="LABELS.jsonl",
                      help="human labels of runs' cases, one per line: {\"run\": ID, \"case\": QID, "
                           "\"labels\": {\"accuracy\": 1}}; print each labelled run's judge metric as a "
                           "prediction-powered estimate and 95%% interval beside the judge-only one")
    out = p.add_argument_group("output")
    out.add_argument("--json", type=Path, metavar="PATH", help="write the records (one per run, metric, type)")
    out.add_argument("--report", type=Path, metavar="DIR", help="write report.html (one self-contained file with a "
                                                                "per-question drill-down), report.md, "
                                                                "comparison.json and PNG plots")
    out.add_argument("--csv", type=Path, metavar="PATH",
                     help="write one row per run: dataset, top-k, one param per swept key, headline metrics "
                          "(for pandas)")
    out.add_argument("--save-baseline", type=Path, metavar="PATH",
                     help="write the selected runs' per-case scores as a baseline file (commit it for CI)")
    gate = p.add_argument_group("CI gate")
    gate.add_argument("--fail-on-regression", action="store_true",
                      help="exit 1 when a metric is worse than its baseline (significant and at least its practical "
           "threshold) by more than --tolerance")
    gate.add_argument("--tolerance", type=float, default=0.0, metavar="ABS",
                      help="absolute worsening tolerated by the gate (0)")
    return p


def option_problem(args: argparse.Namespace) -> str | None:
    """The first option outside its range, as one line naming it and the valid values; else None."""
    from ragbench.compare.comparison import (
        alpha_problem,  # deferred: startup of ragbench.compare --help, 0.57 s
    )

    if not 100 <= args.resamples <= MAX_RESAMPLES:
        return f"--resamples {args.resamples}: use 100 to {MAX_RESAMPLES:,} (default 2000)"
    if (problem := alpha_problem(args.alpha)) is not None:
        return problem
    from ragbench.compare.power import (
        power_problem,  # deferred: startup of ragbench.compare --help, 0.57 s
    )

    if (problem := power_problem(args.power)) is not None:
        return f"--{problem}"
    if not (math.isfinite(args.tolerance) and args.tolerance >= 0):
        return (f"--tolerance {args.tolerance:g}: use a finite number >= 0, in the metric's own units "
                "(0, the default, gates on any significant worsening)")
    try:
        min_effects(args)
    except ValueError as exc:
        return str(exc)
    return None


def min_effects(args: argparse.Namespace) -> dict[str, MinEffect]:
    """``--min-effect`` as {metric: MinEffect}; ValueError naming the bad one."""
    from ragbench.compare.metrics import (
        parse_min_effect,  # deferred: startup of ragbench.compare --help, 0.57 s
    )

    return dict(parse_min_effect(text) for text in args.min_effect)


def output_problem(args: argparse.Namespace) -> str | None:
    """Each output the command was asked to write, checked before any run is read: a folder that can
    be made and written (``--report``), a file in one (``--json``, ``--save-baseline``)."""
    for flag, path, is_folder in (("--report", args.report, True), ("--json", args.json, False),
                                  ("--save-baseline", args.save_baseline, False), ("--csv", args.csv, False)):
        if path is None:
            continue
        fix = f"give {flag} a path in a writable folder"
        if not is_folder and path.is_dir():
            return f"{flag} {path}: is a folder; fix: name a file, e.g. {path / 'comparison.json'}"
        try:
            writable_folder(path if is_folder else path.parent, f"{flag} {path}", fix)
        except ConfigError as exc:
            return coded(exc)
    return None


def _write_error(what: str, path: Path, exc: OSError) -> int:
    print(f"ragbench.compare: error: cannot write {what} {path} ({os_reason(path, exc)}); fix: give it a path "
          "in a writable folder with free space", file=sys.stderr)
    return USAGE


def run(argv: Sequence[str] | None = None) -> int:
    """Parses ``argv``, compares, writes what was asked for; returns the exit code."""
    args = parser().parse_args(argv)
    problem = option_problem(args) or output_problem(args)
    if problem:
        print(f"ragbench.compare: error: {problem}", file=sys.stderr)
        return USAGE
    from ragbench.compare.analysis import analyse  # deferred: startup of ragbench.compare --help, 0.57 s
    from ragbench.compare.comparison import (
        regressions,  # deferred: startup of ragbench.compare --help, 0.57 s
    )
    from ragbench.compare.report import (  # deferred: startup of ragbench.compare --help, 0.57 s
        print_table,
        write_json,
        write_report,
    )
    from ragbench.compare.runcases import (  # deferred: startup of ragbench.compare --help, 0.57 s
        load_baseline,
        save_baseline,
    )
    from ragbench.compare.select import (  # deferred: startup of ragbench.compare --help, 0.57 s
        find_runs,
        load_cases,
        open_store,
    )
    default_uri, default_experiment = tracking_defaults()
    uri = args.tracking_uri or default_uri
    try:
        client = open_store(uri)
        found, notes = find_runs(client, uri, args.experiment or default_experiment, sweep=args.sweep,
                                 run_ids=args.runs or (), filter_string=args.filter)
        runs = [load_cases(client, r) for r in found]
        baseline_runs = load_baseline(args.baseline_file) if args.baseline_file else []
        comp, taxa = analyse(runs, metrics=args.metric, baseline=args.baseline, baseline_runs=baseline_runs,
                             resamples=args.resamples, seed=args.seed, alpha=args.alpha, notes=notes,
                             min_effects=min_effects(args), power=args.power)
        from ragbench.compare.ppi import ppi_results  # deferred: startup of ragbench.compare --help, 0.57 s

        ppi = ppi_results(args.ppi, runs) if args.ppi else []
    except RagbenchError as exc:
        print(f"ragbench.compare: error: {coded(exc)}", file=sys.stderr)
        return USAGE
    except Exception as exc:
        from mlflow.exceptions import MlflowException  # imported by then: the store was opened

        if not isinstance(exc, MlflowException):
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        print(f"ragbench.compare: error: the MLflow store {uri} failed: {first[:300]}; fix: check --tracking-uri "
              "(a tracking server must be running and reachable)", file=sys.stderr)
        return USAGE
    print_table(comp, taxa)
    if ppi:
        from ragbench.compare.report import console  # deferred: startup of ragbench.compare --help, 0.57 s
        from ragbench.compare.terminal import (
            print_ppi,  # deferred: startup of ragbench.compare --help, 0.57 s
        )

        print_ppi(console, comp, ppi)
    if args.json:
        try:
            write_json(args.json, comp, taxa, ppi=[r.json() for r in ppi])
        except OSError as exc:
            return _write_error("--json", args.json, exc)
        print(f"records: {args.json}")
    if args.csv:
        from ragbench.tracking.run_records import (
            read_all,  # deferred: startup of ragbench.compare --help, 0.57 s
        )
        from ragbench.tracking.runs_table import (  # deferred: startup of ragbench.compare --help, 0.57 s
            csv_text,
            record_rows,
            sweep_keys_of,
        )

        try:  # each row from the run's record (ragbench.tracking.run_records)
            args.csv.write_text(csv_text(record_rows(read_all(client, found)), sweep_keys_of(client, found)),
                                encoding="utf-8")
        except RagbenchError as exc:  # a run without its record (logged before it, or the file damaged)
            print(f"ragbench.compare: error: --csv: {coded(exc)}", file=sys.stderr)
            return USAGE
        except OSError as exc:
            return _write_error("--csv", args.csv, exc)
        print(f"runs: {args.csv} ({len(found)} rows)")
    if args.report:
        from ragbench.compare.html_data import (  # deferred: startup of ragbench.compare --help, 0.57 s
            load_records,
            run_tags,
        )

        try:
            files = write_report(args.report, comp, taxa, records=load_records(client, found, runs), tags=run_tags(found))
        except OSError as exc:
            return _write_error("--report", args.report, exc)
        print(f"report: {files[1]} and {files[0]} ({len(files)} files)")
    if args.save_baseline:
        try:
            save_baseline(args.save_baseline, runs)
        except OSError as exc:
            return _write_error("--save-baseline", args.save_baseline, exc)
        print(f"baseline: {args.save_baseline} ({len(runs)} runs, {sum(len(r.qids) for r in runs)} cases)")
    if not args.fail_on_regression:
        return PASS
    bad = regressions(comp, tolerance=args.tolerance)
    for r in bad:
        print(f"REGRESSION: {r.run_name or r.run} {r.metric}: {r.value:.4g} vs baseline {r.baseline_value:.4g} "
              f"(delta {r.delta:+.4g}, {comp.level:.0%} CI [{r.ci_low:+.4g}, {r.ci_high:+.4g}], Holm p "
              f"{r.p_holm:.2g}, practical threshold {r.min_effect:.4g}, tolerance {args.tolerance:g})")
    if bad:
        return REGRESSION
    print(f"gate: pass (no metric significantly worse than its baseline by more than {args.tolerance:g})")
    return PASS


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)  # a retry per line: the error says it once
    try:
        return run(argv)
    except KeyboardInterrupt:  # Ctrl-C while the store is read or the resamples run: one line, as a sweep says
        print("ragbench.compare: interrupted; rerun the command", file=sys.stderr)
        return INTERRUPTED
