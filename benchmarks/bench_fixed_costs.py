"""Where a job's fixed time goes, on the bundled sample sweep with its retrieval already cached.

    python benchmarks/bench_fixed_costs.py                      # this checkout, 3 runs, medians
    python benchmarks/bench_fixed_costs.py --base ../base-tree  # and another checkout, alternating: ratios

The sweep is ``-m dataset=locomo retrieval=bm25 retrieval.topk=3,5,10 stages=retrieval``, run in a fresh
folder (so a new MLflow store) against a stage cache warmed once beforehand, so what is left is mostly
fixed cost. Each run is one ``python -m ragbench`` process with timers around:

- store set-up: opening the tracking store (``client_for``: creating/migrating or checking the sqlite
  store, the client), with MLflow's modules imported before the timer starts (import time is not
  something a job can save);
- per-job logging: every ``MlflowTracker`` call a job makes (outermost calls only), and the number of
  ``MlflowClient`` calls behind them (each one a store round-trip);
- Hydra composition: ``ConfigLoaderImpl.load_configuration`` and ``load_sweep_config``, per job;
- the whole process's wall time.

Prints medians over the runs and, with ``--base``, this checkout's figure over the base's (< 1: faster).
The machine may be shared: the runs alternate between the checkouts so load hits both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SWEEP = ["-m", "dataset=locomo", "retrieval=bm25", "retrieval.topk=3,5,10", "stages=retrieval"]
JOBS = 3

CHILD = r'''
import atexit, functools, json, runpy, sys, time
import mlflow, mlflow.store.tracking.sqlalchemy_store  # imported before any timer
from mlflow import MlflowClient

T0 = time.perf_counter()
acc = {"store_s": 0.0, "tracker_s": 0.0, "client_calls": 0, "compose_s": 0.0, "jobs": 0}
depth = {"tracker": 0, "client": 0}

def wrap(owner, name, key, counter=None, nest=None):
    original = getattr(owner, name)
    @functools.wraps(original)
    def timed(*a, **k):
        outer = nest is None or depth[nest] == 0
        if nest:
            depth[nest] += 1
        start = time.perf_counter()
        try:
            return original(*a, **k)
        finally:
            if nest:
                depth[nest] -= 1
            if outer:
                if key:
                    acc[key] += time.perf_counter() - start
                if counter:
                    acc[counter] += 1
    setattr(owner, name, timed)

from ragbench.tracking import mlflow_tracker
from ragbench.tracking.mlflow_tracker import MlflowTracker
wrap(mlflow_tracker, "client_for", "store_s")
for name in [n for n in vars(MlflowTracker) if not n.startswith("_") and callable(vars(MlflowTracker)[n])
             and n not in ("batched",)]:
    wrap(MlflowTracker, name, "tracker_s", nest="tracker")
for name in [n for n in vars(MlflowClient) if not n.startswith("_") and callable(vars(MlflowClient)[n])]:
    wrap(MlflowClient, name, None, counter="client_calls", nest="client")
from hydra._internal.config_loader_impl import ConfigLoaderImpl
wrap(ConfigLoaderImpl, "load_configuration", "compose_s")
wrap(ConfigLoaderImpl, "load_sweep_config", "compose_s")
import ragbench.app
wrap(ragbench.app, "run", None, counter="jobs")
# the sweep's parent run (on_multirun_start/end) is not a job's cost: time it apart
from ragbench import sweep
for name in ("on_multirun_start", "on_multirun_end"):
    original = getattr(sweep.MlflowSweepCallback, name)
    def parent(self, *a, _o=original, **k):
        before = (acc["tracker_s"], acc["client_calls"])
        start = time.perf_counter()
        try:
            return _o(self, *a, **k)
        finally:
            acc["sweep_parent_s"] = acc.get("sweep_parent_s", 0.0) + time.perf_counter() - start
            acc["parent_tracker_s"] = acc.get("parent_tracker_s", 0.0) + acc["tracker_s"] - before[0]
            acc["parent_client_calls"] = acc.get("parent_client_calls", 0) + acc["client_calls"] - before[1]
    setattr(sweep.MlflowSweepCallback, name, parent)

def report():
    acc["wall_s"] = time.perf_counter() - T0
    print("BENCH " + json.dumps(acc), file=sys.stderr, flush=True)
atexit.register(report)
sys.argv = ["ragbench", *sys.argv[1:]]
runpy.run_module("ragbench", run_name="__main__", alter_sys=True)
'''


def one_run(repo: Path, cache: Path) -> dict[str, float]:
    """One sweep in a fresh folder with ``repo`` on the path; the figures of its BENCH line."""
    env = {**os.environ, "PYTHONPATH": str(repo), "RAGBENCH_STAGE_CACHE": str(cache)}
    with tempfile.TemporaryDirectory(prefix="bench-fixed-") as tmp:
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", CHILD, *SWEEP], cwd=tmp, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({repo}):\n{proc.stderr[-3000:]}")
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("BENCH "))
    acc = json.loads(line[len("BENCH "):])
    jobs = acc["jobs"] or JOBS
    return {
        "process wall (s)": wall,
        "store set-up (s)": acc["store_s"],
        "per-job logging (s)": (acc["tracker_s"] - acc.get("parent_tracker_s", 0.0)) / jobs,
        "per-job store calls": (acc["client_calls"] - acc.get("parent_client_calls", 0)) / jobs,
        "per-job Hydra composition (s)": acc["compose_s"] / jobs,
        "sweep parent run (s)": acc.get("sweep_parent_s", 0.0),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, help="another checkout to compare with (e.g. a worktree of main)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    trees = {"this": REPO, **({"base": args.base.resolve()} if args.base else {})}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="bench-fixed-cache-") as tmp:
        cache = Path(tmp)
        for tree in trees.values():  # warm the stage cache (and each tree's imports) once, untimed
            one_run(tree, cache)
        for i in range(args.runs):
            for name, tree in (trees.items() if i % 2 == 0 else reversed(trees.items())):
                results[name].append(one_run(tree, cache))
                print(f"run {i + 1} {name}: " + ", ".join(f"{k} {v:.3g}" for k, v in results[name][-1].items()),
                      file=sys.stderr)
    print(f"\nmedians of {args.runs} runs ({os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f})")
    keys = list(results["this"][0])
    print(f"{'':32s}" + "".join(f"{name:>12s}" for name in trees) + ("     this/base" if args.base else ""))
    for key in keys:
        med = {name: statistics.median(r[key] for r in rows) for name, rows in results.items()}
        ratio = f"{med['this'] / med['base']:14.2f}" if args.base and med["base"] else ""
        print(f"{key:32s}" + "".join(f"{med[name]:12.3f}" for name in trees) + ratio)


if __name__ == "__main__":
    main()
