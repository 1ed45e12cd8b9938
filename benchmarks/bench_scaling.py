"""How dense-flat, dense-HNSW and BM25 grow with the corpus: wall, CPU and peak memory per 1,000 sentences.

    python benchmarks/bench_scaling.py [--sizes 2000,5000,10000] [--queries 500]
    nice -n 19 python benchmarks/bench_scaling.py --sizes 50000,100000,200000 \
        --hnsw-sizes 6250,12500,25000 --threads 1 --max-seconds 600   # the >= 200,000-sentence corpus

HNSW is capped at 25,000 there: on random 384-d vectors its build grows as about n^1.6 (2.1 CPU-s per
1,000 sentences at 25,000), so 200,000 would take over 20 CPU-minutes; flat and BM25 grow linearly.

The corpus is synthetic: the sentences of the bundled Qasper sample repeated, each copy with a unique
id word (``s000123``), up to the size asked (``corpus(200_000)`` builds 200,000). The dense paths index
random L2-normalised 384-d vectors (MiniLM's width) instead of encoding the text: encoding 200,000
sentences with MiniLM takes far too long on a shared CPU. Flat costs depend only on the count and the
width; HNSW's build is slower on random vectors (no low-dimensional structure) than on real embeddings,
so its figures are an upper bound. Queries are sentences of the corpus with their id word dropped. Each
(path, size) runs in a fresh subprocess (ragbench's own retriever classes: build, then one batched
search at depth 10, libraries imported before the clock starts), so its peak RSS is its own; printed per 1,000 sentences: wall s, CPU s, and the
peak RSS above the process's RSS before building (MiB), and at the end how each path grows: the
log-log slope of CPU s against the size between the smallest and largest size run (1 = linear).

A path's next size is skipped when its projected wall time (the last size's, scaled by the size ratio
to the power of the slope seen so far, at least 1) is over ``--max-seconds``: HNSW's graph build grows
faster than linearly, so ``--hnsw-sizes`` gives it its own (smaller) sizes. ``--threads`` sets faiss's
OpenMP threads (0: faiss's default); on a shared machine 1 keeps CPU seconds free of spin-waiting.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

PATHS = ("dense-flat", "dense-hnsw", "bm25")
DIM = 384
SAMPLE = Path(__file__).resolve().parents[1] / "ragbench" / "datasets" / "samples" / "qasper"


def sentences() -> list[str]:
    """The sentences of the bundled Qasper sample's paragraphs."""
    out: list[str] = []
    for path in sorted(SAMPLE.rglob("*.json")):
        data = json.loads(path.read_text())
        for paper in data.values() if isinstance(data, dict) else []:
            for sec in (paper.get("full_text") or []) if isinstance(paper, dict) else []:
                for para in sec.get("paragraphs") or []:
                    out.extend(s for s in re.split(r"(?<=[.!?])\s+", para) if len(s) > 20)
    if not out:
        raise SystemExit(f"no Qasper paragraphs found under {SAMPLE}")
    return out


def corpus(n: int) -> tuple[list[str], list[str]]:
    base = sentences()
    ids = [f"s{i:06d}" for i in range(n)]
    return ids, [f"{base[i % len(base)]} {ids[i]}" for i in range(n)]


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def one(path: str, n: int, nq: int, threads: int = 0) -> dict[str, float]:
    """Build and search one path at one size (in this process); wall/CPU seconds, peak memory MiB."""
    import bm25s  # noqa: F401 - imported before timing: a path's cost is its build and search, not imports
    import faiss
    import numpy as np

    if threads:
        faiss.omp_set_num_threads(threads)

    from ragbench.retrieval.bm25 import BM25Retriever
    from ragbench.retrieval.dense import FaissRetriever

    ids, texts = corpus(n)
    rng = np.random.default_rng(0)
    pick = rng.choice(n, size=min(nq, n), replace=False)
    qtexts = [texts[i].rsplit(" ", 1)[0] for i in pick]
    vectors = qvecs = None
    if path != "bm25":
        vectors = rng.standard_normal((n, DIM), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        qvecs = vectors[pick] + 0.05 * rng.standard_normal((len(pick), DIM), dtype=np.float32)
    retriever = BM25Retriever() if path == "bm25" else FaissRetriever(index=path.removeprefix("dense-"))
    base_rss = _rss_mib()
    wall, cpu = time.perf_counter(), time.process_time()
    retriever.build(ids=ids, texts=texts, vectors=vectors)
    build_wall = time.perf_counter() - wall
    retriever.search(texts=qtexts, vectors=qvecs, k=10)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"build_wall": build_wall, "wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
            "peak_mib": peak - base_rss, "peak_total_mib": peak}


def slope(points: list[tuple[int, float]]) -> float:
    """The log-log slope of a cost against the size between the first and last point (1 = linear)."""
    (n0, c0), (n1, c1) = points[0], points[-1]
    return math.log(c1 / c0) / math.log(n1 / n0) if n1 != n0 and c0 > 0 and c1 > 0 else float("nan")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="2000,5000,10000")
    p.add_argument("--hnsw-sizes", default="", help="sizes for dense-hnsw (default: --sizes)")
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--paths", default=",".join(PATHS))
    p.add_argument("--threads", type=int, default=0, help="faiss OpenMP threads (0: faiss's default)")
    p.add_argument("--max-seconds", type=float, default=600.0,
                   help="skip a path's next size when its projected wall time is over this")
    p.add_argument("--one", nargs=2, metavar=("PATH", "SIZE"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args.queries, args.threads)))
        return 0
    print(f"{'path':11s} {'sentences':>9s} {'wall s':>8s} {'CPU s':>8s} {'peak MiB':>9s} | per 1,000 sentences: "
          f"{'wall s':>7s} {'CPU s':>7s} {'MiB':>6s}  (build wall s; process peak RSS MiB)")
    growth: dict[str, list[tuple[int, float]]] = {}
    for path in args.paths.split(","):
        sizes = args.hnsw_sizes if path == "dense-hnsw" and args.hnsw_sizes else args.sizes
        done: list[tuple[int, float]] = []
        for n in (int(s) for s in sizes.split(",")):
            if done:
                last_n, last_wall = done[-1]
                exponent = max(1.0, slope(done)) if len(done) > 1 else 1.0
                projected = last_wall * (n / last_n) ** exponent
                if projected > args.max_seconds:
                    print(f"{path:11s} {n:9d} skipped: projected {projected:.0f} s > --max-seconds "
                          f"{args.max_seconds:g}", flush=True)
                    break
            cmd = [sys.executable, __file__, "--one", path, str(n), "--queries", str(args.queries),
                   "--threads", str(args.threads)]
            r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()
                           .splitlines()[-1])
            done.append((n, r["wall"]))
            growth.setdefault(path, []).append((n, r["cpu"]))
            per = 1000 / n
            print(f"{path:11s} {n:9d} {r['wall']:8.2f} {r['cpu']:8.2f} {r['peak_mib']:9.1f} | "
                  f"{'':21s}{r['wall'] * per:7.3f} {r['cpu'] * per:7.3f} {r['peak_mib'] * per:6.2f}  "
                  f"({r['build_wall']:.2f}; {r['peak_total_mib']:.0f})", flush=True)
    for path, points in growth.items():
        if len(points) > 1:
            k = slope(points)
            kind = "linear" if k < 1.15 else "superlinear"
            print(f"{path}: CPU s grows as n^{k:.2f} from {points[0][0]:,} to {points[-1][0]:,} sentences ({kind})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
