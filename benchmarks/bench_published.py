"""Published-table check: ragbench's document-level nDCG@10 on a BEIR folder beside the published figures.

    python benchmarks/bench_published.py --beir /data/beir/scifact [--name scifact] [--methods bm25,dense]

Each method runs as a real job (``python -m ragbench dataset=beir dataset.path=PATH chunker=document
retrieval=<m> stages=retrieval retrieval.topk=100``, all-MiniLM-L6-v2 for ``dense``) into a throwaway MLflow
store. Printed per method: ragbench's logged ``retrieval/doc/ndcg_at_10``; the same figure recomputed by
pytrec_eval and, when the ``beir`` package is installed, by BEIR's ``EvaluateRetrieval.evaluate`` on the
run's own document rankings (exported from its ``cases.jsonl``, BEIR's identical-id rule applied); and the
published figure where one is known:

- dense: MTEB's result for sentence-transformers/all-MiniLM-L6-v2 (SciFact 64.51);
- bm25: bm25s's Lucene BM25, k1=1.2, b=0.75 (xhluca/bm25-benchmarks README, "NDCG@10" table), ragbench's
  default ``retrieval=bm25`` settings.

On any folder (the test fixture ``tests/fixtures/beir.py`` writes one) the ragbench, pytrec_eval and BEIR
columns must agree to 1e-9; on a published dataset the ragbench column should sit within 0.5 of the
published one.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# nDCG@10 x 100 on each BEIR test split, as published
PUBLISHED: dict[str, dict[str, float]] = {
    "dense": {"scifact": 64.51},  # MTEB results, sentence-transformers/all-MiniLM-L6-v2
    "bm25": {  # xhluca/bm25-benchmarks README, NDCG@10, bm25s Lucene k1=1.2 b=0.75
        "arguana": 48.7, "cqadupstack": 30.1, "climate-fever": 13.7, "dbpedia-entity": 30.3, "fiqa": 25.3,
        "fever": 50.3, "hotpotqa": 58.5, "msmarco": 22.6, "nfcorpus": 31.8, "nq": 29.1, "quora": 80.5,
        "scidocs": 15.6, "scifact": 68.0, "trec-covid": 61.0, "webis-touche2020": 33.2,
    },
}
SOURCES = {"dense": "MTEB all-MiniLM-L6-v2", "bm25": "bm25s Lucene (k1=1.2, b=0.75)"}
OVERRIDES = {"bm25": ["retrieval=bm25"], "dense": ["retrieval=dense", "embedder=minilm"]}


def run_job(method: str, beir: Path, store: Path, topk: int) -> str:
    """Runs one retrieval-only job; returns its MLflow run id."""
    uri = f"sqlite:///{store}/mlflow.db"
    cmd = [sys.executable, "-m", "ragbench", "dataset=beir", f"dataset.path={beir}", "chunker=document",
           "stages=retrieval", f"retrieval.topk={topk}", f"retrieval.search_depth={topk}", *OVERRIDES[method],
           f"tracking.uri={uri}", f"tracking.artifact_root={store}/artifacts", f"cache.dir={store}/cache",
           f"hydra.run.dir={store}/hydra/{method}"]
    subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("ragbench") or client.search_experiments()[0]
    return str(client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"])[0].info.run_id)


def rankings(rows: Sequence[Mapping[str, Any]]) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """(qrels, results) in BEIR's shapes from a run's case rows: each question's documents in first-hit
    order scored ``n - rank + 1`` (the export's rule), the identical id already removed."""
    from ragbench.export import qrels, ranking

    scored = [r for r in rows if r["evidence"]["matched"]]
    results: dict[str, dict[str, float]] = {}
    for r in scored:
        ids = ranking(r, "doc")
        results[r["qid"]] = {d: float(len(ids) - i) for i, d in enumerate(ids)}
    return {r["qid"]: {d: int(g) for d, g in qrels(r, "doc").items()} for r in scored}, results


def official(qrels: dict[str, dict[str, int]], results: dict[str, dict[str, float]]) -> dict[str, float | None]:
    """nDCG@10 from pytrec_eval (mean over questions) and from BEIR's EvaluateRetrieval when installed."""
    import pytrec_eval

    per_q = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(results)
    out: dict[str, float | None] = {"pytrec_eval": sum(v["ndcg_cut_10"] for v in per_q.values()) / len(qrels)}
    try:
        from beir.retrieval.evaluation import EvaluateRetrieval
    except ImportError:
        out["beir"] = None
    else:
        ndcg, *_ = EvaluateRetrieval.evaluate(qrels, results, [10], ignore_identical_ids=True)
        out["beir"] = float(ndcg["NDCG@10"])
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", required=True, type=Path, help="a BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")
    parser.add_argument("--name", help="the BEIR dataset's name for the published lookup (default: the folder name)")
    parser.add_argument("--methods", default="bm25,dense")
    parser.add_argument("--topk", type=int, default=100)
    args = parser.parse_args(argv)
    from ragbench.verify import load_run

    name = (args.name or args.beir.resolve().name).lower()
    print(f"dataset {name} ({args.beir}), document level, nDCG@10 x 100")
    print(f"{'method':8} {'ragbench':>9} {'pytrec_eval':>12} {'BEIR':>9} {'published':>10} {'diff':>7}  source")
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="ragbench-published-") as tmp:
        for method in args.methods.split(","):
            run_id = run_job(method, args.beir.resolve(), Path(tmp) / method, args.topk)
            rows, logged, _, _ = load_run(run_id, f"sqlite:///{tmp}/{method}/mlflow.db")
            ours = 100 * logged["retrieval/doc/ndcg_at_10"]
            others = official(*rankings(rows))
            worst = max(worst, abs(ours - 100 * float(others["pytrec_eval"] or 0.0)))
            if others["beir"] is not None:
                worst = max(worst, abs(ours - 100 * others["beir"]))
            pub = PUBLISHED[method].get(name)
            beir = f"{100 * others['beir']:9.2f}" if others["beir"] is not None else f"{'n/a':>9}"
            print(f"{method:8} {ours:9.2f} {100 * float(others['pytrec_eval'] or 0.0):12.2f} {beir} "
                  f"{pub if pub is not None else '-':>10} {f'{ours - pub:+.2f}' if pub is not None else '-':>7}  "
                  f"{SOURCES[method] if pub is not None else 'no published figure for this dataset'}")
    print(f"largest difference between ragbench and the official evaluators: {worst / 100:.2e}")
    return 0 if worst / 100 <= 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
