"""ragbench's retrieval sweep against the physical floor, on the same LoCoMo data, in one run.

    python benchmarks/bench_floor.py [--path /data/locomo] [--runs 3] [--backends auto,torch]

The floor (``--floor`` runs it alone) does only what the sweep ``retrieval=dense,bm25 x
retrieval.topk=3,5,10`` must do: load and chunk the dataset, encode each distinct chunk and question
text once (the same MiniLM embedder), then per conversation (LoCoMo's document scope) one batched
faiss flat search and one batched bm25s scoring pass at depth 10, and the six jobs' retrieval metrics
from those hits with ragbench's metric rule. The sweep is ``python -m ragbench -m`` with a cold stage
cache and a fresh MLflow store, with ``stages=retrieval`` (no generator, no judge: the floor has neither). Both run as subprocesses, floor and
sweep alternating ``--runs`` times; printed are wall and CPU seconds (user+sys of the child) of each,
their medians and ratios, and that every retrieval metric of the six jobs equals the floor's.

Per ``--backends`` entry (``embedder.backend``; default ``auto,torch``: the default and the old default)
floor and sweep run with that backend, so each sweep is measured against its own floor; the last lines
compare the backends (CPU of the torch sweep / CPU of the auto sweep, both cold, and the same for the
floors). The one-time work (``python -m ragbench.embed prepare``: the ONNX export and the backend check,
which the README's install line runs) is done once before the runs, timed apart, into a download cache
the runs share; each sweep still starts from an empty stage cache (``cache.dir``) and MLflow store.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOPKS = (3, 5, 10)
RETRIEVERS = ("dense", "bm25")


def _floor(path: str | None, out: str, backend: str) -> None:
    """The floor itself (runs in a child process)."""
    import logging

    import numpy as np
    from hydra import compose, initialize_config_module

    from ragbench.build import build
    from ragbench.evidence import EvidenceMatcher
    from ragbench.judge.retrieval import metric_ks, retrieval_scores
    from ragbench.retrieval.bm25 import top_hits
    from ragbench.types import Hit

    logging.disable(logging.WARNING)
    overrides = ["dataset=locomo", "embedder.show_progress=false", f"embedder.backend={backend}"] + (
        [f"dataset.path={path}"] if path else [])
    with initialize_config_module(config_module="ragbench.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    c, _ = build(cfg)
    evalset = c.dataset.load()
    tree = c.chunker.chunk(evalset.documents)
    chunks = tree.searchable()
    texts = [ch.text for ch in chunks]
    queries = list(evalset.queries)
    distinct = list(dict.fromkeys(texts))
    qdistinct = list(dict.fromkeys(q.text for q in queries))
    dvec = c.embedder.embed_documents(distinct)
    qvec = c.embedder.embed_queries(qdistinct)
    drow = {t: i for i, t in enumerate(distinct)}
    qrow = {t: i for i, t in enumerate(qdistinct)}
    depth = max(TOPKS)
    hits: dict[str, list[list[Hit]]] = {r: [[] for _ in queries] for r in RETRIEVERS}
    by_doc: dict[tuple[str, ...], list[int]] = {}
    for i, q in enumerate(queries):
        by_doc.setdefault(tuple(sorted(set(q.doc_ids))), []).append(i)
    import bm25s
    import faiss

    faiss.omp_set_num_threads(1)
    tokenizer = c.retriever.tokenizer if hasattr(c.retriever, "tokenizer") else None
    from ragbench.retrieval.tokenize import Tokenizer

    tokenizer = tokenizer or Tokenizer()
    for docs, rows in by_doc.items():
        own = [j for j, ch in enumerate(chunks) if ch.doc_id in docs] if docs else list(range(len(chunks)))
        ids = [chunks[j].chunk_id for j in own]
        index = faiss.IndexFlatIP(dvec.shape[1])
        index.add(np.ascontiguousarray(dvec[[drow[texts[j]] for j in own]]))
        qv = np.ascontiguousarray(qvec[[qrow[queries[i].text] for i in rows]])
        scores, found = index.search(qv, min(len(own), depth + 1))
        for i, srow, frow in zip(rows, scores, found, strict=True):
            order = np.lexsort((frow, -srow))[:depth]  # ragbench's tie order (row ascending)
            hits["dense"][i] = [Hit(chunk_id=ids[frow[o]], score=float(srow[o]), rank=r + 1)
                                for r, o in enumerate(order)]
        bm = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        bm.index(tokenizer.tokenize_many([texts[j] for j in own]), show_progress=False)
        for i in rows:
            token_ids = bm.get_tokens_ids(tokenizer.tokenize(queries[i].text))
            if token_ids:
                hits["bm25"][i] = top_hits(bm.get_scores_from_ids(token_ids), ids, depth)
    matcher = EvidenceMatcher(tree)
    emaps = [matcher.match(q) for q in queries]
    result: dict[str, dict[str, float]] = {}
    for name in RETRIEVERS:
        for k in TOPKS:
            ks = metric_ks(k)
            sums: dict[str, list[float]] = {}
            for i in range(len(queries)):
                for key, v in retrieval_scores(tree, emaps[i], hits[name][i][: max(ks)], ks, k).items():
                    sums.setdefault(key, []).append(v)
            result[f"{name}/{k}"] = {key: sum(v) / len(v) for key, v in sums.items()}
    Path(out).write_text(json.dumps(result))


def _timed(cmd: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _sweep_metrics(store: str) -> dict[str, dict[str, float]]:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{store}")
    out = {}
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id]):
            p = run.data.params
            name, k = p.get("retrieval.retriever._target_", ""), p.get("retrieval.topk")
            if k is None:
                continue
            kind = "bm25" if "bm25" in name.lower() else "dense"
            out[f"{kind}/{k}"] = {m: v for m, v in run.data.metrics.items() if m.startswith("retrieval/")}
    return out


def _once(path: str | None, backend: str, tmp: str, env: dict[str, str]) -> tuple[float, float, float, float, list]:
    """(floor wall, floor CPU, sweep wall, sweep CPU, differing metrics) of one floor/sweep pair."""
    out = os.path.join(tmp, "floor.json")
    fw, fc = _timed([sys.executable, __file__, "--floor", out, "--backend", backend,
                     *(["--path", path] if path else [])], tmp, env)
    floor = json.loads(Path(out).read_text())
    sw, sc = _timed([sys.executable, "-m", "ragbench", "-m", "dataset=locomo", "retrieval=dense,bm25",
                     "retrieval.topk=3,5,10", "stages=retrieval", "embedder.show_progress=false",
                     f"embedder.backend={backend}", f"cache.dir={os.path.join(tmp, 'cache')}",
                     *([f"dataset.path={path}"] if path else [])], tmp, env)
    swept = _sweep_metrics(os.path.join(tmp, "mlruns", "mlflow.db"))
    diffs = [(job, key, v, swept.get(job, {}).get(key)) for job, m in floor.items() for key, v in m.items()
             if swept.get(job, {}).get(key) != v]
    n = sum(len(m) for m in floor.values())
    print(f"  {backend}: floor {fw:.1f} s wall / {fc:.1f} s CPU; sweep {sw:.1f} s wall / {sc:.1f} s CPU; "
          f"ratio wall {sw / fw:.2f}, CPU {sc / fc:.2f}; {n - len(diffs)}/{n} retrieval metrics of "
          f"{len(floor)} jobs equal", flush=True)
    for d in diffs[:10]:
        print("    differs:", d)
    return fw, fc, sw, sc, [(job, key, v) for job, m in floor.items() for key, v in sorted(m.items())]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--path", default=None, help="a full LoCoMo folder (dataset.path); default: the bundled sample")
    p.add_argument("--runs", type=int, default=1, help="floor/sweep pairs, alternating (median reported)")
    p.add_argument("--backends", default="auto,torch", help="embedder.backend values, each its own floor")
    p.add_argument("--floor", metavar="OUT", default=None, help=argparse.SUPPRESS)
    p.add_argument("--backend", default="auto", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.floor:
        _floor(args.path, args.floor, args.backend)
        return 0
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    with tempfile.TemporaryDirectory() as downloads:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_HUB_OFFLINE": "1",
               "TRANSFORMERS_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true", "TOKENIZERS_PARALLELISM": "false",
               "RAGBENCH_CACHE": downloads}
        for backend in backends:
            pw, pc = _timed([sys.executable, "-m", "ragbench.embed", "prepare", f"embedder.backend={backend}"],
                            downloads, env)
            print(f"one-time prepare, embedder.backend={backend}: {pw:.1f} s wall / {pc:.1f} s CPU", flush=True)
        got: dict[str, list[tuple[float, float, float, float]]] = {b: [] for b in backends}
        floors_metrics: dict[str, list] = {}
        for run in range(args.runs):
            print(f"run {run + 1}:", flush=True)
            order = backends if run % 2 == 0 else backends[::-1]  # alternate which backend goes first
            for backend in order:
                with tempfile.TemporaryDirectory() as tmp:
                    fw, fc, sw, sc, metrics = _once(args.path, backend, tmp, env)
                got[backend].append((fw, fc, sw, sc))
                floors_metrics[backend] = metrics
    med: dict[str, list[float]] = {}
    for backend, rows in got.items():
        med[backend] = [statistics.median(r[i] for r in rows) for i in range(4)]
        fw, fc, sw, sc = med[backend]
        ratios = [r[2] / r[0] for r in rows]
        print(f"{backend}, median of {args.runs}: floor {fw:.1f} s wall / {fc:.1f} s CPU; sweep {sw:.1f} s wall / "
              f"{sc:.1f} s CPU; sweep vs its floor: wall {sw / fw:.2f}, CPU {sc / fc:.2f} (per-run wall ratio "
              f"{min(ratios):.2f} to {max(ratios):.2f}; seconds over the floor: median "
              f"{statistics.median(r[2] - r[0] for r in rows):.1f} s)")
    if "auto" in med and "torch" in med:
        a, t = med["auto"], med["torch"]
        print(f"old default (torch) / new default (auto), cold: sweep CPU {t[3] / a[3]:.2f}x, wall {t[2] / a[2]:.2f}x; "
              f"floor CPU {t[1] / a[1]:.2f}x; auto sweep vs torch floor: CPU {a[3] / t[1]:.2f}")
        same = floors_metrics["auto"] == floors_metrics["torch"]
        print(f"floor retrieval metrics, auto vs torch: {'identical' if same else 'DIFFER'} "
              f"({len(floors_metrics['auto'])} values)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
