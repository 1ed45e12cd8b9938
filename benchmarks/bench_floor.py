"""ragbench's retrieval sweep against the physical floor, on the same LoCoMo data, in one run.

    python benchmarks/bench_floor.py [--path /data/locomo] [--runs 3]

The floor (``--floor`` runs it alone) does only what the sweep ``retrieval=dense,bm25 x
retrieval.topk=3,5,10`` must do: load and chunk the dataset, encode each distinct chunk and question
text once (the same MiniLM embedder), then per conversation (LoCoMo's document scope) one batched
faiss flat search and one batched bm25s scoring pass at depth 10, and the six jobs' retrieval metrics
from those hits with ragbench's metric rule. The sweep is ``python -m ragbench -m`` with a cold stage
cache and a fresh MLflow store, with ``stages=retrieval`` (no generator, no judge: the floor has neither). Both run as subprocesses, floor and
sweep alternating ``--runs`` times; printed are wall and CPU seconds (user+sys of the child) of each,
their medians and ratios, and that every retrieval metric of the six jobs equals the floor's.
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


def _floor(path: str | None, out: str) -> None:
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
    overrides = ["dataset=locomo", "embedder.show_progress=false"] + ([f"dataset.path={path}"] if path else [])
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--path", default=None, help="a full LoCoMo folder (dataset.path); default: the bundled sample")
    p.add_argument("--runs", type=int, default=1, help="floor/sweep pairs, alternating (median reported)")
    p.add_argument("--floor", metavar="OUT", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.floor:
        _floor(args.path, args.floor)
        return 0
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true", "TOKENIZERS_PARALLELISM": "false"}
    extra = [f"dataset.path={args.path}"] if args.path else []
    floors, sweeps = [], []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "floor.json")
            fw, fc = _timed([sys.executable, __file__, "--floor", out, *(["--path", args.path] if args.path else [])],
                            tmp, env)
            floor = json.loads(Path(out).read_text())
            sw, sc = _timed([sys.executable, "-m", "ragbench", "-m", "dataset=locomo", "retrieval=dense,bm25",
                             "retrieval.topk=3,5,10", "stages=retrieval", "embedder.show_progress=false",
                             *extra],
                            tmp, {**env, "RAGBENCH_CACHE": os.path.join(tmp, "cache")})
            swept = _sweep_metrics(os.path.join(tmp, "mlruns", "mlflow.db"))
        diffs = [(job, key, v, swept.get(job, {}).get(key)) for job, m in floor.items() for key, v in m.items()
                 if swept.get(job, {}).get(key) != v]
        n = sum(len(m) for m in floor.values())
        print(f"run {run + 1}: floor {fw:.1f} s wall / {fc:.1f} s CPU; ragbench sweep {sw:.1f} s wall / "
              f"{sc:.1f} s CPU; ratio wall {sw / fw:.2f}, CPU {sc / fc:.2f}; "
              f"{n - len(diffs)}/{n} retrieval metrics of {len(floor)} jobs equal", flush=True)
        for d in diffs[:10]:
            print("  differs:", d)
        floors.append((fw, fc))
        sweeps.append((sw, sc))
    fw, fc = (statistics.median(x[i] for x in floors) for i in (0, 1))
    sw, sc = (statistics.median(x[i] for x in sweeps) for i in (0, 1))
    print(f"median of {args.runs}: floor {fw:.1f} s wall / {fc:.1f} s CPU; sweep {sw:.1f} s wall / {sc:.1f} s CPU; "
          f"ratio wall {sw / fw:.2f}, CPU {sc / fc:.2f}")
    # on a shared machine the floor itself moves by 10-15% between runs: the per-run figures show how much
    ratios = [s[0] / f[0] for f, s in zip(floors, sweeps, strict=True)]
    added = [s[0] - f[0] for f, s in zip(floors, sweeps, strict=True)]
    print(f"per run: wall ratio median {statistics.median(ratios):.2f} (from {min(ratios):.2f} to {max(ratios):.2f}); "
          f"the sweep's seconds over the floor: median {statistics.median(added):.1f} s "
          f"(from {min(added):.1f} to {max(added):.1f}); the floor from {min(f[0] for f in floors):.1f} s "
          f"to {max(f[0] for f in floors):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
