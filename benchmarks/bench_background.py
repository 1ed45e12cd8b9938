"""What writing the case files in a forked child saves a sweep: ``tracking.background_artifacts`` on and off.

    python benchmarks/bench_background.py [--path /data/locomo] [--runs 4]

The sweep is ``retrieval=dense,bm25 x retrieval.topk=3,5,10`` with ``stages=retrieval`` on LoCoMo (the
bundled sample, or the file under ``--path``), with a warm stage cache (one sweep first fills it, so the
encoder is out of the figures) and a fresh MLflow store each time: what is left is the sweep's own work,
the part the child takes a share of. On and off alternate ``--runs`` times; printed are the wall and CPU
seconds (user+sys of the sweep and its children) of each run, their medians and the on/off ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench_floor import _timed  # this folder is on sys.path when the script runs


def _sweep(work: Path, path: str | None, extra: list[str]) -> tuple[float, float]:
    shutil.rmtree(work / "mlruns", ignore_errors=True)
    shutil.rmtree(work / "multirun", ignore_errors=True)
    cmd = [sys.executable, "-m", "ragbench", "-m", "dataset=locomo", "retrieval=dense,bm25", "retrieval.topk=3,5,10",
           "stages=retrieval", "embedder.show_progress=false", *([f"dataset.path={path}"] if path else []), *extra]
    return _timed(cmd, str(work), {**os.environ, "RAGBENCH_CACHE": str(work / "cache")})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", help="a LoCoMo folder (data/locomo10.json); default: the bundled sample")
    ap.add_argument("--runs", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ragbench-bench-background-") as tmp:
        work = Path(tmp)
        _sweep(work, args.path, [])  # fills the stage cache
        times: dict[str, list[tuple[float, float]]] = {"true": [], "false": []}
        for run in range(args.runs):
            for on in ("true", "false"):
                times[on].append(_sweep(work, args.path, [f"tracking.background_artifacts={on}"]))
            (w1, c1), (w0, c0) = times["true"][-1], times["false"][-1]
            print(f"run {run + 1}: background {w1:.1f} s wall / {c1:.1f} s CPU; in the job's process {w0:.1f} s "
                  f"wall / {c0:.1f} s CPU; ratio wall {w1 / w0:.2f}, CPU {c1 / c0:.2f}", flush=True)
        med = {on: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for on, t in times.items()}
        (w1, c1), (w0, c0) = med["true"], med["false"]
        print(f"median of {args.runs}: background {w1:.1f} s wall / {c1:.1f} s CPU; in the job's process {w0:.1f} s "
              f"wall / {c0:.1f} s CPU; ratio wall {w1 / w0:.2f}, CPU {c1 / c0:.2f}")


if __name__ == "__main__":
    main()
