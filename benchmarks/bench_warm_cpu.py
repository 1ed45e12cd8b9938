"""CPU seconds of the design-card sweep, cold and warm.

    python benchmarks/bench_warm_cpu.py              # 2 rounds; prints medians and the warm/cold ratios
    python benchmarks/bench_warm_cpu.py --rounds 1

Each round runs in a fresh folder (a new stage cache and MLflow store):
``python -m ragbench -m retrieval.topk=3,5,10 dataset=locomo,qasper`` cold, then the same command again
(warm: every job resumed), then once more with ``resume=false`` (warm: every stage from the cache). CPU is
user + system time of the command and every process it started and reaped (the case-file child), from
``getrusage(RUSAGE_CHILDREN)``: unlike wall time it does not grow when other processes share the machine.
Target: warm <= 0.12 x cold. (The forked encoder worker was judged here and removed: it cost 2.3% CPU cold
and 35% warm and saved no wall time; issue 28, item 5.)
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SWEEP = ["-m", "retrieval.topk=3,5,10", "dataset=locomo,qasper"]
# names the heavy modules a command imported (on stderr, after everything else)
PROBE = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: print('IMPORTED', ','.join(sorted(m for m in ('torch', 'sentence_transformers', "
    "'litellm', 'faiss', 'bm25s', 'matplotlib', 'scipy', 'sklearn') if m in sys.modules)) or '-', file=sys.stderr))\n"
    "sys.argv = ['ragbench', *sys.argv[1:]]\n"
    "runpy.run_module('ragbench', run_name='__main__', alter_sys=True)\n"
)


def command(args: list[str], cwd: Path) -> tuple[float, float, str]:
    """(CPU seconds of the command and its reaped descendants, wall seconds, heavy modules imported)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"ragbench failed in {cwd}:\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    imported = next((ln.split(" ", 1)[1] for ln in proc.stderr.splitlines() if ln.startswith("IMPORTED ")), "?")
    return cpu, wall, imported


def one(folder: Path) -> dict[str, tuple[float, float, str]]:
    """Cold, warm (resume) and warm (resume=false) in a fresh folder."""
    args = [*SWEEP, f"cache.dir={folder / 'cache'}"]
    out = {"cold": command(args, folder), "warm": command(args, folder),
           "warm_all_stages": command([*args, "resume=false"], folder)}
    for kind, (cpu, wall, imported) in out.items():
        print(f"  {kind:15s} CPU {cpu:6.2f} s  wall {wall:6.2f} s  imported: {imported}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    opts = parser.parse_args()
    results: list[dict[str, tuple[float, float, str]]] = []
    for r in range(opts.rounds):
        folder = Path(tempfile.mkdtemp(prefix="bench-warm-"))
        print(f"round {r + 1}: {folder}", flush=True)
        try:
            results.append(one(folder))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    m = {k: statistics.median(run[k][0] for run in results) for k in ("cold", "warm", "warm_all_stages")}
    print(f"median CPU cold {m['cold']:.2f} s, warm {m['warm']:.2f} s, warm resume=false {m['warm_all_stages']:.2f} s")
    print(f"RATIO warm / cold = {m['warm'] / m['cold']:.3f}, warm(resume=false) / cold = "
          f"{m['warm_all_stages'] / m['cold']:.3f} (target <= 0.12)")


if __name__ == "__main__":
    main()
