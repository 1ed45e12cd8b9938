"""How dense-flat, dense-IVF, dense-HNSW and BM25 grow to a million passages: wall, CPU, peak memory, recall.

    python benchmarks/bench_scaling.py [--sizes 20000,50000] [--queries 1000]
    nice -n 10 python benchmarks/bench_scaling.py --sizes 50000,200000,1000000 --threads 1   # the 1M run
    python benchmarks/bench_scaling.py --paths "" --sizes 1000000 --encoder 10000   # MiniLM per 10,000 passages

The corpus is synthetic. Dense paths: random-but-clustered L2-normalised 384-d float32 vectors (MiniLM's
width; 4,096 Gaussian centres, each row its centre plus noise, so neighbours are about as close as real
sentence embeddings' and an IVF or HNSW index has structure to use), written once to a ``.npy`` at the
largest size and memory-mapped, as ragbench's stage cache now stores corpus vectors (a smaller size is
a prefix of it). Encoding a million passages with MiniLM on 2 shared cores would take hours, so the
encoder is measured apart (``--encoder N``: passages per second, extrapolated to the largest size) and
the vectors stand in for its output. BM25: synthetic passages of 20-80 words drawn from a Zipf(1.07)
vocabulary of 100,000 pronounceable pseudo-words, searched through ragbench's own tokenizer (stemming,
NLTK stopwords) and bm25s. Queries: ``--queries`` corpus rows, each plus noise (dense) or 6 of its words
(BM25).

Each (path, size) runs in a fresh subprocess (ragbench's own retriever classes: build, then one batched
search at depth 10, libraries imported and the corpus generated or mapped before the clock starts), so
its peak RSS (VmHWM: ``getrusage``'s maxrss would start at the parent's) is its own; the mapped vectors' pages count in it as the index
touches them. Printed per path and size: wall and CPU seconds of build + search, the peak RSS above the
process's RSS before building (MiB) and the process's peak, and recall@10 against exact search on the
same queries (``FaissRetriever.ann_recall``, the job metric ``retrieval/ann_recall_at_10``: a flat
search over the same mapped vectors, timed apart). Flat is the exact search; bm25s scores every passage
exactly, so BM25 is its own reference. At the end, each path's growth exponent: the least-squares slope
of log CPU seconds against log size over every size run (1 = linear; n log n over 50k-1M reads ~1.1).

A path's next size is skipped when its projected wall time (the last size's, scaled by the size ratio to
the power of the slope so far, at least 1) is over ``--max-seconds``. ``--threads`` sets faiss's OpenMP
threads (0: faiss's default; ragbench's searches always use 1); on a shared machine 1 keeps CPU seconds
free of spin-waiting.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PATHS = ("dense-flat", "dense-ivf", "bm25", "dense-hnsw")
DIM = 384
CENTRES = 4096
NOISE = 0.5  # per-dimension noise against unit-variance centres: a row's cosine to its centre is ~0.89
QUERY_NOISE = 0.3
VOCAB = 100_000
ZIPF = 1.07
BLOCK = 65_536
K = 10


def write_vectors(path: Path, n: int) -> None:
    """``n`` clustered unit vectors into ``path`` (a memory-mapped .npy), block by block (seeded)."""
    import numpy as np

    centres = np.random.default_rng(1).standard_normal((CENTRES, DIM), dtype=np.float32)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, DIM))
    for b, start in enumerate(range(0, n, BLOCK)):
        rng = np.random.default_rng([2, b])
        rows = min(BLOCK, n - start)
        x = centres[rng.integers(0, CENTRES, rows)] + NOISE * rng.standard_normal((rows, DIM), dtype=np.float32)
        out[start: start + rows] = x / np.linalg.norm(x, axis=1, keepdims=True)
    out.flush()


def pseudo_word(i: int) -> str:
    """A pronounceable word per vocabulary rank (consonant-vowel syllables): no stopword, stable stems."""
    cons, vows = "bdfgklmnprstvz", "aeiou"
    out = ""
    i += 70  # at least two syllables
    while i:
        i, r = divmod(i, len(cons) * len(vows))
        out += cons[r // len(vows)] + vows[r % len(vows)]
    return out


def passages(n: int, seed: int = 3) -> list[str]:
    """``n`` synthetic passages of 20-80 words from a Zipf vocabulary (seeded)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    cdf = np.cumsum(1.0 / np.arange(1, VOCAB + 1) ** ZIPF)
    cdf /= cdf[-1]
    words = [pseudo_word(i) for i in range(VOCAB)]
    lengths = rng.integers(20, 81, n)
    ids = np.searchsorted(cdf, rng.random(int(lengths.sum())))
    out, pos = [], 0
    for length in lengths.tolist():
        out.append(" ".join([words[j] for j in ids[pos: pos + length].tolist()]))
        pos += length
    return out


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_mib() -> float:
    """This process's own peak RSS. ``getrusage``'s ru_maxrss is kept across fork and execve on Linux, so
    a child's starts at its parent's RSS; VmHWM is the peak of the child's own address space."""
    own = _status_mib("VmHWM")
    return own or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def retriever_for(path: str, args: argparse.Namespace):  # noqa: ANN201 - a ragbench retriever
    from ragbench.retrieval.bm25 import BM25Retriever
    from ragbench.retrieval.dense import FaissRetriever

    if path == "bm25":
        return BM25Retriever()
    if path == "dense-ivf":
        return FaissRetriever(index="ivf", nlist=args.nlist, nprobe=args.nprobe, train_size=args.train_size)
    if path == "dense-hnsw":
        return FaissRetriever(index="hnsw", hnsw_m=args.hnsw_m, ef_construction=args.ef_construction,
                              ef_search=args.ef_search)
    return FaissRetriever(index="flat")


def one(path: str, n: int, args: argparse.Namespace) -> dict[str, float]:
    """Build and search one path at one size (in this process): seconds, peak MiB, recall@10 vs exact."""
    import bm25s  # noqa: F401 - imported before timing: a path's cost is its build and search, not imports
    import faiss
    import numpy as np

    if args.threads:
        faiss.omp_set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    pick = np.sort(rng.choice(n, size=min(args.queries, n), replace=False))
    ids = [f"p{i:07d}" for i in range(n)]
    texts: list[str] = ids  # the dense paths never read the texts
    vectors = qvecs = None
    qtexts: list[str] = []
    if path == "bm25":
        texts = passages(n)
        qrng = np.random.default_rng(4)
        qtexts = [" ".join(qrng.choice(texts[i].split(), size=6, replace=False)) for i in pick]
    else:
        vectors = np.load(Path(args.work) / "vectors.npy", mmap_mode="r")[:n]
        q = vectors[pick] + QUERY_NOISE / math.sqrt(DIM) * rng.standard_normal((len(pick), DIM), dtype=np.float32)
        qvecs = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
    retriever = retriever_for(path, args)
    base_rss = _status_mib("VmRSS")
    wall, cpu = time.perf_counter(), time.process_time()
    retriever.build(ids=ids, texts=texts, vectors=vectors)
    build_wall, build_cpu = time.perf_counter() - wall, time.process_time() - cpu
    hits = retriever.search(texts=qtexts, vectors=qvecs, k=K)
    out = {"build_wall": build_wall, "build_cpu": build_cpu, "wall": time.perf_counter() - wall,
           "cpu": time.process_time() - cpu}
    peak = peak_mib()
    out.update(peak_mib=peak - base_rss, peak_total_mib=peak, recall=float("nan"), recall_s=0.0)
    if path in ("dense-ivf", "dense-hnsw"):
        start = time.perf_counter()
        out["recall"] = retriever.ann_recall(vectors=qvecs, hits=hits, ks=[K])[f"retrieval/ann_recall_at_{K}"]
        out["recall_s"] = time.perf_counter() - start
    return out


def encoder_rate(n: int) -> dict[str, float]:
    """MiniLM (ragbench's default embedder) on ``n`` synthetic passages: seconds, passages per second."""
    from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder(show_progress=False)
    texts = passages(n, seed=5)
    emb.embed_documents(texts[:64])  # load the model and warm up, outside the clock
    wall, cpu = time.perf_counter(), time.process_time()
    emb.embed_documents(texts)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"n": n, "wall": wall, "cpu": cpu, "per_s": n / wall}


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log cost against log size (1 = linear); NaN under two usable points."""
    pts = [(math.log(n), math.log(c)) for n, c in points if c > 0]
    if len(pts) < 2 or len({x for x, _ in pts}) < 2:
        return float("nan")
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--sizes", default="20000,50000")
    p.add_argument("--hnsw-sizes", default="", help="sizes for dense-hnsw (default: --sizes)")
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--paths", default=",".join(PATHS))
    p.add_argument("--threads", type=int, default=0, help="faiss OpenMP threads (0: faiss's default)")
    p.add_argument("--max-seconds", type=float, default=1800.0,
                   help="skip a path's next size when its projected wall time is over this")
    p.add_argument("--nlist", type=int, default=1024)
    p.add_argument("--nprobe", type=int, default=16)
    p.add_argument("--train-size", type=int, default=65_536)
    p.add_argument("--hnsw-m", type=int, default=16)
    p.add_argument("--ef-construction", type=int, default=40)
    p.add_argument("--ef-search", type=int, default=64)
    p.add_argument("--encoder", type=int, default=0, help="also time MiniLM on this many passages")
    p.add_argument("--work", default="",
                   help="folder for the synthetic vectors, made when missing (default: a temp folder)")
    p.add_argument("--encoder-one", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--one", nargs=2, metavar=("PATH", "SIZE"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def work_problem(work: str) -> str | None:
    """``--work`` made when missing; one line naming it and the fix when it cannot be."""
    path = Path(work)
    if path.exists() and not path.is_dir():
        return f"--work {work}: is a file, not a folder; fix: give a folder (made when missing)"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"--work {work}: cannot make the folder ({exc.strerror or exc}); fix: give a writable folder"
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.work and not (args.one or args.encoder_one) and (problem := work_problem(args.work)):
        print(f"bench_scaling: {problem}", file=sys.stderr)
        return 2
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args)))
        return 0
    if args.encoder_one:
        print(json.dumps(encoder_rate(args.encoder_one)))
        return 0
    paths = [path for path in args.paths.split(",") if path]  # --paths "" --encoder N: the encoder alone
    sizes = {path: [int(s) for s in (args.hnsw_sizes if path == "dense-hnsw" and args.hnsw_sizes
                                     else args.sizes).split(",")] for path in paths}
    own_work = not args.work
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-scaling-"))
    flags = ["--queries", str(args.queries), "--threads", str(args.threads), "--work", str(work),
             "--nlist", str(args.nlist), "--nprobe", str(args.nprobe), "--train-size", str(args.train_size),
             "--hnsw-m", str(args.hnsw_m), "--ef-construction", str(args.ef_construction),
             "--ef-search", str(args.ef_search)]
    started, first_load = time.perf_counter(), os.getloadavg()[0]
    try:
        dense_max = max((max(s) for p, s in sizes.items() if p != "bm25"), default=0)
        if dense_max:
            start = time.perf_counter()
            write_vectors(work / "vectors.npy", dense_max)
            print(f"# {dense_max:,} clustered {DIM}-d vectors written to {work} in "
                  f"{time.perf_counter() - start:.1f} s ({dense_max * DIM * 4 / 2**30:.2f} GiB)", flush=True)
        if paths:
            print(f"# {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; ivf nlist={args.nlist} nprobe={args.nprobe}"
                  f" train={args.train_size}; hnsw M={args.hnsw_m} efConstruction={args.ef_construction} "
                  f"efSearch={args.ef_search}; {args.queries} queries, k={K}", flush=True)
            print(f"{'path':10s} {'n':>9s} {'wall s':>8s} {'CPU s':>8s} {'build s':>8s} {'peak MiB':>9s} "
                  f"{'proc MiB':>9s} {'recall@10':>9s}  per 1,000: {'CPU s':>7s} {'MiB':>6s}  (load)")
        growth: dict[str, list[tuple[int, float]]] = {}
        walls: dict[str, list[tuple[int, float]]] = {}
        for path in paths:
            done: list[tuple[int, float]] = []
            for n in sizes[path]:
                if done:
                    last_n, last_wall = done[-1]
                    exponent = max(1.0, slope(done)) if len(done) > 1 else 1.0
                    projected = last_wall * (n / last_n) ** exponent
                    if projected > args.max_seconds:
                        print(f"{path:10s} {n:9d} skipped: projected {projected:.0f} s > --max-seconds "
                              f"{args.max_seconds:g}", flush=True)
                        break
                cmd = [sys.executable, __file__, "--one", path, str(n), *flags]
                load = os.getloadavg()[0]
                r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()
                               .splitlines()[-1])
                done.append((n, r["wall"]))
                growth.setdefault(path, []).append((n, r["cpu"]))
                walls.setdefault(path, []).append((n, r["wall"]))
                per = 1000 / n
                recall = "exact" if math.isnan(r["recall"]) else f"{r['recall']:.4f}"
                print(f"{path:10s} {n:9d} {r['wall']:8.1f} {r['cpu']:8.1f} {r['build_wall']:8.1f} "
                      f"{r['peak_mib']:9.0f} {r['peak_total_mib']:9.0f} {recall:>9s}  {'':10s} "
                      f"{r['cpu'] * per:7.4f} {r['peak_mib'] * per:6.2f}  ({load:.1f}"
                      + (f"; recall check {r['recall_s']:.1f} s" if r["recall_s"] else "") + ")", flush=True)
        for path, points in growth.items():
            if len(points) > 1:
                k, kw = slope(points), slope(walls[path])
                print(f"{path}: CPU s grows as n^{k:.2f}, wall as n^{kw:.2f}, from {points[0][0]:,} to "
                      f"{points[-1][0]:,} ({'linear' if k < 1.15 else 'superlinear'})", flush=True)
        child = os.times()
        if paths:
            print(f"# total: {time.perf_counter() - started:.0f} s wall, {child.children_user + child.children_system:.0f} "
                  f"CPU-s in the path processes; load {first_load:.1f} at the start, {os.getloadavg()[0]:.1f} at "
                  "the end", flush=True)
        if args.encoder:
            cmd = [sys.executable, __file__, "--encoder-one", str(args.encoder)]
            r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()
                           .splitlines()[-1])
            largest = max(int(s) for s in args.sizes.split(","))
            print(f"encoder (MiniLM, {r['n']:,} passages): {r['wall']:.1f} s wall, {r['cpu']:.1f} CPU-s, "
                  f"{r['per_s']:.0f} passages/s; {largest:,} passages would take {largest / r['per_s'] / 3600:.1f} h",
                  flush=True)
    finally:
        if own_work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
