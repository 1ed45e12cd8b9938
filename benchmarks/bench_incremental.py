"""Incremental indexing (issue 44 item 8): the texts a job encodes after one Qasper paper changed.

On a copy of the bundled Qasper sample (3 papers), with one stage cache: (1) a cold run encodes the corpus;
(2) one paper's paragraph is edited and the job reruns: only that paper's chunks should be encoded; (3) a cold
run on the edited corpus in an empty cache gives the metrics the incremental run must equal. Each run is
``python -m ragbench dataset=qasper dataset.path=<copy>`` in its own folder with its own sqlite store; the
count is the run's ``ingest/embedded_texts`` metric (texts the embedder encoded). ``--src TREE`` runs another
source tree (e.g. ``git archive HEAD`` unpacked) to measure what it re-encodes.

    python benchmarks/bench_incremental.py [--src TREE] [--paper 2003.07723]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "ragbench" / "datasets" / "samples" / "qasper" / "qasper-train-v0.3.json"
VOLATILE = ("latency/", "cache/", "ingest/", "timing/", "time/", "llm/cache", "system/", "saved/",
            "counts/embedded_texts")


def edit_paper(path: Path, paper: str) -> int:
    """Appends a sentence to ``paper``'s first paragraph of over 200 characters; the paragraph count."""
    data = json.loads(path.read_text(encoding="utf-8"))
    sections = data[paper]["full_text"]
    sec, i = next((s, i) for s in sections for i, p in enumerate(s["paragraphs"]) if len(p) > 200)
    sec["paragraphs"][i] += " This sentence was added to measure incremental indexing."
    path.write_text(json.dumps(data), encoding="utf-8")
    return sum(len(s["paragraphs"]) for s in sections)


def run(folder: Path, data: Path, cache: Path, src: Path) -> tuple[dict[str, float], float]:
    """One job; its metrics (from its own sqlite store) and wall seconds."""
    folder.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(src), "RAGBENCH_CACHE": str(cache)}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ragbench", "dataset=qasper", f"dataset.path={data}",
                           f"tracking.uri=sqlite:///{folder / 'mlflow.db'}", f"hydra.run.dir={folder / 'out'}"],
                          cwd=folder, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        sys.exit(f"job failed in {folder}:\n{proc.stderr[-3000:]}")
    with sqlite3.connect(folder / "mlflow.db") as db:
        rows = db.execute("SELECT key, value FROM latest_metrics").fetchall()
    return {k: float(v) for k, v in rows}, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", type=Path, default=REPO, help="source tree to run (default: this checkout)")
    ap.add_argument("--paper", default="2003.07723", help="the paper id to edit")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-incremental-"))
    try:
        data = root / "qasper"
        data.mkdir()
        shutil.copy(SAMPLE, data / SAMPLE.name)
        cache = root / "cache"
        first, t1 = run(root / "cold", data, cache, args.src)
        same, t2 = run(root / "warm", data, cache, args.src)
        edit_paper(data / SAMPLE.name, args.paper)
        after, t3 = run(root / "edited", data, cache, args.src)
        fresh, t4 = run(root / "edited-cold", data, root / "cache-cold", args.src)
        n = "ingest/embedded_texts"
        print(f"source tree: {args.src}")
        print(f"documents={int(first.get('ingest/documents', 3))} (Qasper sample), edited paper {args.paper}")
        print(f"texts encoded, first run (cold cache):          {int(first[n])}  ({t1:.1f} s wall)")
        print(f"texts encoded, rerun unchanged (warm):          {int(same[n])}  ({t2:.1f} s wall)")
        print(f"texts encoded, rerun after editing one paper:   {int(after[n])}  ({t3:.1f} s wall)")
        print(f"texts encoded, cold run on the edited corpus:   {int(fresh[n])}  ({t4:.1f} s wall)")
        scores = {k: v for k, v in after.items() if not k.startswith(VOLATILE)}
        cold = {k: v for k, v in fresh.items() if not k.startswith(VOLATILE)}
        differ = sorted(k for k in scores.keys() | cold.keys() if scores.get(k) != cold.get(k))
        print(f"metrics after the edit equal the cold run on the edited corpus: {not differ} "
              f"({len(scores)} metrics compared{'; differ: ' + ', '.join(differ) if differ else ''})")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
