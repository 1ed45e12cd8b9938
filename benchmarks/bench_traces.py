"""What MLflow traces (``tracking.traces``, issue 40) cost a sweep: the same sweep with each mode, interleaved.

Each run is ``python -m ragbench -m <sweep> tracking.traces=<mode>`` in a fresh folder with its own sqlite
``tracking.uri`` and ``hydra.sweep.dir``; all runs share one stage cache (``cache.dir``), warmed by one
untimed run first, so encoding and retrieval come from the cache and what differs is the traces (``--cold``:
each run its own empty cache, the whole pipeline timed). Rounds
alternate the modes' order (round 1: off, on, ...; round 2: reversed). Printed per run and as medians: wall
seconds, CPU seconds (user+sys of the sweep's process tree), traces and assessments in the store.

    python benchmarks/bench_traces.py --sweep card --rounds 2 [--src TREE]   # the design-card sweep
    python benchmarks/bench_traces.py --sweep floor --rounds 2 [--path P]  # bench_floor.py's retrieval sweep
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SWEEPS = {
    "card": ["retrieval.topk=3,5,10", "dataset=locomo,qasper"],
    "floor": ["dataset=locomo", "retrieval=dense,bm25", "retrieval.topk=3,5,10", "stages=retrieval",
              "embedder.show_progress=false"],
}


def _run(args: list[str], folder: Path, env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ragbench", "-m", *args,
                           f"tracking.uri=sqlite:///{folder / 'mlflow.db'}", f"hydra.sweep.dir={folder / 'multirun'}"],
                          cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"sweep failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _counts(db: Path) -> tuple[int, int]:
    """(traces, assessments) in a sqlite store."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        traces = con.execute("SELECT COUNT(*) FROM trace_info").fetchone()[0] if "trace_info" in tables else 0
        found = con.execute("SELECT COUNT(*) FROM assessments").fetchone()[0] if "assessments" in tables else 0
        return int(traces), int(found)
    finally:
        con.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", choices=sorted(SWEEPS), default="card")
    parser.add_argument("--path", help="a full LoCoMo folder (dataset.path) for --sweep floor")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--modes", default="off,on", help="tracking.traces values, comma-separated")
    parser.add_argument("--work", help="a folder for the runs (default: a temp folder)")
    parser.add_argument("--cold", action="store_true", help="each run its own empty stage cache (no warm-up)")
    parser.add_argument("--src", default=str(REPO), help="the ragbench tree to run (e.g. a `git archive` of a "
                        "commit, so that edits in the checkout do not land mid-measurement)")
    ns = parser.parse_args()
    modes = ns.modes.split(",")
    args = SWEEPS[ns.sweep] + ([f"dataset.path={ns.path}"] if ns.path else [])
    work = Path(ns.work or tempfile.mkdtemp(prefix="bench_traces_"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": ns.src, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1"}
    if not ns.cold:
        args = [*args, f"cache.dir={work / 'cache'}"]
        warm = work / "warm"
        warm.mkdir(exist_ok=True)
        w, c = _run([*args, "tracking.traces=off"], warm, env)
        print(f"warm-up (untimed in the results): {w:.1f} s wall, {c:.1f} s CPU", flush=True)
    results: dict[str, list[tuple[float, float, int, int]]] = {m: [] for m in modes}
    for r in range(ns.rounds):
        for mode in (modes if r % 2 == 0 else modes[::-1]):
            folder = work / f"r{r}-{mode}"
            folder.mkdir()
            load = os.getloadavg()[0]
            cache = [f"cache.dir={folder / 'cache'}"] if ns.cold else []
            wall, cpu = _run([*args, *cache, f"tracking.traces={mode}"], folder, env)
            traces, found = _counts(folder / "mlflow.db")
            results[mode].append((wall, cpu, traces, found))
            print(f"round {r + 1} {mode}: {wall:.1f} s wall, {cpu:.1f} s CPU, {traces} traces, {found} "
                  f"assessments (load {load:.1f} at start)", flush=True)
    base = statistics.median(x[1] for x in results[modes[0]])
    base_wall = statistics.median(x[0] for x in results[modes[0]])
    for mode in modes:
        wall = statistics.median(x[0] for x in results[mode])
        cpu = statistics.median(x[1] for x in results[mode])
        traces = results[mode][0][2]
        per = f", {(cpu - base) / traces * 1000:.1f} CPU-ms a trace" if traces and mode != modes[0] else ""
        print(f"median {mode}: {wall:.1f} s wall ({(wall / base_wall - 1) * 100:+.1f}%), {cpu:.1f} s CPU "
              f"({(cpu / base - 1) * 100:+.1f}%), {traces} traces{per}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
