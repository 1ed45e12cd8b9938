"""The semantic answer metrics (``judge=semantic``, issue 43): what they cost the design-card sweep, and how they
agree with the LLM judge and with token F1 on the bundled samples.

``cpu``: the design-card sweep (``python -m ragbench -m retrieval.topk=3,5,10 dataset=locomo,qasper``) with the
default judge and with ``'judge=[lexical,semantic]'``, interleaved (round 1: off, on; round 2: on, off; ...),
each run in a fresh folder with its own sqlite store. ``--cold``: each run its own empty stage cache (the whole
pipeline computed); else each run gets a copy of a stage cache warmed by one untimed run of the default sweep
(vectors, hits and answers cached; the semantic scores never are, so they are computed every time). Printed:
CPU seconds (user+sys of the sweep's process tree) and wall seconds per run, their medians and the extra CPU.

``agreement``: one job per dataset (top-k 5, the offline extractive generator) with
``'judge=[lexical,llm,semantic]'``, the LLM judge on the bundled local model (``judge.backend=local``:
SmolLM2-135M-Instruct, docs/local-models.md), then Spearman's rho (``scipy.stats.spearmanr``) over the cases of
each semantic metric against ``judge/<metric>`` and against ``answer/f1``; a Markdown table for docs/metrics.md.

    python benchmarks/bench_semantic.py cpu --rounds 2 [--cold] [--src TREE]
    python benchmarks/bench_semantic.py agreement [--judge-metric accuracy] [--src TREE]
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
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CARD = ["retrieval.topk=3,5,10", "dataset=locomo,qasper"]
MODES = {"off": [], "on": ["judge=[lexical,semantic]"]}
SEMANTIC = ("answer/semantic_similarity", "answer/bertscore_f1", "answer/rouge_l")


def _env(src: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": src, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1"}


def _run(args: list[str], folder: Path, env: dict[str, str], sweep: bool = True) -> tuple[float, float]:
    """(wall s, CPU s of the process tree) of ``python -m ragbench [-m] args`` in ``folder``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ragbench", *(["-m"] if sweep else []), *args,
                           f"tracking.uri=sqlite:///{folder / 'mlflow.db'}",
                           f"tracking.artifact_root={folder / 'artifacts'}",
                           f"hydra.sweep.dir={folder / 'multirun'}", f"hydra.run.dir={folder / 'run'}"],
                          cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"ragbench failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cpu(ns: argparse.Namespace) -> None:
    work = Path(ns.work or tempfile.mkdtemp(prefix="bench_semantic_"))
    work.mkdir(parents=True, exist_ok=True)
    env = _env(ns.src)
    warmed = work / "warm-cache"
    if not ns.cold:
        (work / "warm").mkdir(exist_ok=True)
        w, c = _run([*CARD, f"cache.dir={warmed}"], work / "warm", env)
        print(f"warm-up (untimed): {w:.1f} s wall, {c:.1f} s CPU", flush=True)
    results: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
    for r in range(ns.rounds):
        for mode in (list(MODES) if r % 2 == 0 else list(MODES)[::-1]):
            folder = work / f"r{r}-{mode}"
            folder.mkdir()
            if not ns.cold:
                shutil.copytree(warmed, folder / "cache")
            load = os.getloadavg()[0]
            wall, secs = _run([*CARD, *MODES[mode], f"cache.dir={folder / 'cache'}"], folder, env)
            results[mode].append((wall, secs))
            print(f"round {r + 1} {mode}: {secs:.1f} s CPU, {wall:.1f} s wall (load {load:.1f} at start)", flush=True)
    base = statistics.median(x[1] for x in results["off"])
    for mode, runs in results.items():
        med = statistics.median(x[1] for x in runs)
        print(f"median {mode}: {med:.1f} s CPU ({(med / base - 1) * 100:+.1f}%), "
              f"{statistics.median(x[0] for x in runs):.1f} s wall", flush=True)


def _cases(folder: Path) -> list[dict[str, Any]]:
    """The case rows of the one job run in ``folder``'s store (ragbench.verify's reader)."""
    from mlflow import MlflowClient

    from ragbench.verify import fetch_run, parse_cases

    uri = f"sqlite:///{folder / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    run = next(r for r in runs if r.info.status == "FINISHED" and "answer/f1" in r.data.metrics)
    return parse_cases(fetch_run(run.info.run_id, uri).cases, run.info.run_id)


def agreement(ns: argparse.Namespace) -> None:
    from scipy.stats import spearmanr

    sys.path.insert(0, ns.src)
    work = Path(ns.work or tempfile.mkdtemp(prefix="bench_semantic_agree_"))
    env = _env(ns.src)
    judge = f"judge/{ns.judge_metric}"
    lines = [f"| dataset (cases) | metric | Spearman vs `{judge}` | Spearman vs `answer/f1` |", "|---|---|---|---|"]
    for dataset in ("locomo", "qasper"):
        folder = work / dataset
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "mlflow.db").exists():
            wall, secs = _run([f"dataset={dataset}", "retrieval.topk=5", "judge=[lexical,llm,semantic]",
                               "judge.backend=local", f"judge.metrics=[{ns.judge_metric}]",
                               f"cache.dir={work / 'cache'}"], folder, env, sweep=False)
            print(f"{dataset}: {secs:.0f} s CPU, {wall:.0f} s wall", flush=True)
        rows = [r for r in _cases(folder) if r["status"] == "ok"]
        for key in SEMANTIC:
            cells = []
            for other in (judge, "answer/f1"):
                pairs = [(float(r[key]), float(r[other])) for r in rows if key in r and other in r]
                rho, p = spearmanr([a for a, _ in pairs], [b for _, b in pairs])
                cells.append(f"{rho:.2f} (p={p:.2g}, n={len(pairs)})")
            lines.append(f"| {dataset} ({len(rows)}) | `{key}` | {cells[0]} | {cells[1]} |")
        pairs = [(float(r[judge]), float(r["answer/f1"])) for r in rows if judge in r and "answer/f1" in r]
        rho, p = spearmanr([a for a, _ in pairs], [b for _, b in pairs])
        lines.append(f"| {dataset} ({len(rows)}) | `answer/f1` | {rho:.2f} (p={p:.2g}, n={len(pairs)}) | 1 |")
    print("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("cpu", "agreement"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cold", action="store_true", help="each run its own empty stage cache")
    parser.add_argument("--judge-metric", default="accuracy", help="the LLM judge's rubric (judge.metrics)")
    parser.add_argument("--work", help="a folder for the runs (default: a temp folder)")
    parser.add_argument("--src", default=str(REPO), help="the ragbench tree to run (e.g. a copy, so that edits in "
                        "the checkout do not land mid-measurement)")
    ns = parser.parse_args()
    cpu(ns) if ns.what == "cpu" else agreement(ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
