"""Dump a sweep's metrics from an MLflow store, and diff two dumps (a speed change must change nothing).

    python benchmarks/metrics_diff.py dump sqlite:///before/mlruns/mlflow.db before.json
    python benchmarks/metrics_diff.py dump sqlite:///after/mlruns/mlflow.db after.json
    python benchmarks/metrics_diff.py diff before.json after.json [--ignore-prefix retrieval/ ...]

A job is keyed by its run name (its overrides); the sweep's parent run is skipped. Timings, cache
counters and the single-query latency sample are left out (they measure the machine, not the job).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

SKIP = ("latency/", "cache/", "time/", "timing/", "ingest/model_loaded", "llm/cache", "sweep/")


def dump(uri: str, out: str) -> int:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    jobs: dict[str, dict[str, float]] = {}
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id], max_results=5000):
            if run.data.tags.get("ragbench.role") == "sweep":
                continue
            name = run.info.run_name or run.info.run_id
            jobs[name] = {k: v for k, v in sorted(run.data.metrics.items()) if not k.startswith(SKIP)}
    with open(out, "w") as f:
        json.dump(jobs, f, indent=1, sort_keys=True)
    print(f"{len(jobs)} jobs, {sum(map(len, jobs.values()))} metrics -> {out}")
    return 0


def diff(a_path: str, b_path: str, ignore: list[str]) -> int:
    with open(a_path) as f:
        a = json.load(f)
    with open(b_path) as f:
        b = json.load(f)
    diffs = compared = 0
    for job in sorted(set(a) | set(b)):
        if job not in a or job not in b:
            print(f"job only in {'after' if job in b else 'before'}: {job}")
            diffs += 1
            continue
        for key in sorted(set(a[job]) | set(b[job])):
            if any(key.startswith(p) for p in ignore):
                continue
            compared += 1
            x, y = a[job].get(key), b[job].get(key)
            same = x == y or (x is not None and y is not None and math.isnan(x) and math.isnan(y))
            if not same:
                diffs += 1
                print(f"{job}  {key}: {x} -> {y}")
    print(f"{len(set(a) & set(b))} jobs, {compared} metrics compared, {diffs} differences")
    return 1 if diffs else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("uri")
    d.add_argument("out")
    c = sub.add_parser("diff")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--ignore-prefix", nargs="*", default=[])
    args = p.parse_args()
    return dump(args.uri, args.out) if args.cmd == "dump" else diff(args.before, args.after, args.ignore_prefix)


if __name__ == "__main__":
    sys.exit(main())
