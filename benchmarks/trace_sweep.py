"""Where a sweep's wall time goes: pipeline work vs MLflow, Hydra composition, logging and GC.

    cd "$(mktemp -d)" && RAGBENCH_CACHE=$PWD/cache python /path/to/benchmarks/trace_sweep.py \
        -m retrieval.topk=3,5,10 dataset=locomo,qasper

Runs ``python -m ragbench`` in this process with timers around the stage boundaries, and times every
cyclic-GC pass with ``gc.callbacks``. At exit it prints one line per timed call and the totals, to
stderr. It changes nothing that is measured. The figures are the notes' "what the sweep adds" breakdown.
Each call's line gives its wall seconds and the process's CPU seconds over it (all threads: on a loaded
machine CPU is the steadier figure).
"""

from __future__ import annotations

import atexit
import functools
import gc
import importlib
import runpy
import sys
import time

T0 = time.perf_counter()
CALLS: list[tuple[float, float, float, str]] = []  # (start, wall seconds, process CPU seconds, name)
GC = {"collections": [0, 0, 0], "seconds": [0.0, 0.0, 0.0]}
_gc_start: dict[int, float] = {}

TIMED = [
    ("ragbench.app", "run"),
    ("ragbench.tracking.mlflow_sink", "log_results"),
    ("ragbench.tracking.mlflow_sink", "log_files"),
    ("ragbench.job", "Job._resume"),
    ("ragbench.job", "Job._end"),
    ("ragbench.record", "RecordWriter.case"),
    ("ragbench.record", "case_record"),
    ("ragbench.record", "finished"),
    ("ragbench.pipeline", "Pipeline.run"),
    ("ragbench.tracking.mlflow_tracker", "client_for"),
    ("ragbench.tracking.mlflow_tracker", "MlflowTracker.start_run"),
    ("ragbench.tracking.mlflow_tracker", "MlflowTracker.log_metrics"),
    ("ragbench.tracking.mlflow_tracker", "MlflowTracker.log_table"),
    ("ragbench.sweep", "MlflowSweepCallback.on_multirun_start"),
    ("ragbench.sweep", "MlflowSweepCallback.on_multirun_end"),
    ("hydra._internal.config_loader_impl", "ConfigLoaderImpl.load_configuration"),
    ("ragbench.compare.analysis", "log_sweep_report"),
    ("ragbench.compare.analysis", "analyse"),
    ("ragbench.compare.select", "load_cases"),
    ("ragbench.compare.plots", "write_plots"),
    ("ragbench.compare.html_data", "load_records"),
    ("ragbench.compare.html_data", "drilldown"),
    ("ragbench.compare.html", "write_html"),
    ("ragbench.record", "RecordWriter.finish"),
]


def _wrap(module: str, qualname: str) -> None:
    owner: object = importlib.import_module(module)
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)

    @functools.wraps(original)
    def timed(*args: object, **kwargs: object) -> object:
        start, cpu = time.perf_counter(), time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            CALLS.append((start - T0, time.perf_counter() - start, time.process_time() - cpu, qualname))

    setattr(owner, name, timed)


def _on_gc(phase: str, info: dict) -> None:
    generation = info["generation"]
    if phase == "start":
        _gc_start[generation] = time.perf_counter()
    elif generation in _gc_start:
        GC["collections"][generation] += 1
        GC["seconds"][generation] += time.perf_counter() - _gc_start.pop(generation)


def _report() -> None:
    totals: dict[str, list[float]] = {}
    for start, seconds, cpu, name in sorted(CALLS):
        print(f"{start:8.2f}s  +{seconds:6.2f}s  cpu {cpu:6.2f}s  {name}", file=sys.stderr)
        entry = totals.setdefault(name, [0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += seconds
        entry[2] += cpu
    print("\ntotals (nested calls are counted in their callers too):", file=sys.stderr)
    for name, (count, seconds, cpu) in sorted(totals.items(), key=lambda kv: -kv[1][2]):
        print(f"  {name:40s} {int(count):5d} calls {seconds:7.2f}s wall {cpu:7.2f}s cpu", file=sys.stderr)
    per_gen = ", ".join(f"gen{g}: {n} in {s:.2f}s" for g, (n, s) in
                        enumerate(zip(GC["collections"], GC["seconds"], strict=True)))
    print(f"  cyclic GC: {per_gen}", file=sys.stderr)
    print(f"  wall until the atexit handlers: {time.perf_counter() - T0:.2f}s, process CPU "
          f"{time.process_time():.2f}s", file=sys.stderr)


def main() -> None:
    for module, qualname in TIMED:
        _wrap(module, qualname)
    gc.callbacks.append(_on_gc)
    atexit.register(_report)
    sys.argv = ["ragbench", *sys.argv[1:]]
    runpy.run_module("ragbench", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
