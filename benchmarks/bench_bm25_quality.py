"""BM25 quality: ragbench's BM25 (bm25s) beside rank_bm25 + Porter + NLTK's English stopwords, same chunks.

    pip install rank_bm25   # for this benchmark only; not a ragbench dependency
    python benchmarks/bench_bm25_quality.py [--path /data/locomo] [--topk 10]

Every variant runs through ragbench's own pipeline on the LoCoMo sample (or ``--path``) with the
dataset's default scope (one store per conversation), so the chunks, evidence and metric rules are
the same; only the retriever differs. ``rank_bm25`` is ``BM25Okapi`` (k1=1.5, b=0.75, epsilon=0.25:
its defaults, as AutoRAG uses it) over lowercased ``\\w+`` words, NLTK's Porter stemmer and NLTK's
179-word English stopword list -- taken from bm25s's ``STOPWORDS_EN_PLUS``, which is that list (the
NLTK corpus itself needs a download). Printed: recall/ndcg at the top-k, mrr, and the mean share of
the top-k each variant has in common with rank_bm25's.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ragbench.retrieval.bm25 import BM25Retriever, top_hits
from ragbench.types import Hit

_WORD = re.compile(r"\w+")


def porter_nltk_tokens() -> Callable[[str], list[str]]:
    from bm25s.stopwords import STOPWORDS_EN_PLUS
    from nltk.stem import PorterStemmer

    stem, stop = PorterStemmer().stem, frozenset(STOPWORDS_EN_PLUS)
    return lambda text: [stem(w) for w in _WORD.findall(text.lower()) if w not in stop]


class RankBM25Retriever:
    """rank_bm25's BM25Okapi behind ragbench's Retriever protocol (benchmark only)."""

    needs_vectors = False

    def __init__(self) -> None:
        self.tokens = porter_nltk_tokens()
        self._bm25: Any = None
        self._ids: list[str] = []

    def params(self) -> Mapping[str, Any]:
        return {"retriever": "rank_bm25.BM25Okapi", "stemmer": "nltk-porter", "stopwords": "nltk-english"}

    def build(self, *, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray | None = None) -> None:
        from rank_bm25 import BM25Okapi

        self._bm25 = BM25Okapi([self.tokens(t) for t in texts])
        self._ids = list(ids)

    def depth_limit(self, k: int) -> int | None:
        return None

    def search(self, *, texts: Sequence[str], vectors: np.ndarray | None = None, k: int) -> list[list[Hit]]:
        out = []
        for text in texts:
            terms = self.tokens(text)
            scores = self._bm25.get_scores(terms) if terms else np.zeros(len(self._ids))
            out.append(top_hits(np.asarray(scores, dtype=np.float64), self._ids, k, floor=-np.inf))
        return out


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="ragbench.conf", version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)


def run(components, retriever) -> tuple[dict[str, float], dict[str, list[str]], float]:
    from ragbench.pipeline import Pipeline

    start = time.perf_counter()
    result = Pipeline(dataclasses.replace(components, retriever=retriever)).run()
    wall = time.perf_counter() - start
    ranked = {c.query.qid: [h.chunk_id for h in c.hits] for c in result.cases}
    return dict(result.metrics), ranked, wall


def variants() -> dict[str, Callable[[], Any]]:
    return {
        "rank_bm25 (Okapi, Porter, NLTK stop)": RankBM25Retriever,
        "ragbench default": BM25Retriever,
    }


def main() -> None:
    from ragbench.build import build

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--path", default=None, help="a full LoCoMo folder (dataset.path); default: the bundled sample")
    p.add_argument("--topk", type=int, default=10)
    args = p.parse_args()
    logging.disable(logging.WARNING)
    overrides = ["dataset=locomo", "retrieval=bm25", f"retrieval.topk={args.topk}"]
    if args.path:
        overrides.append(f"dataset.path={args.path}")
    components, _ = build(compose(overrides))
    k = args.topk
    rows, base = [], None
    for name, make in variants().items():
        metrics, ranked, wall = run(components, make())
        if base is None:
            base = ranked
        common = np.mean([len(set(ranked[q][:k]) & set(base[q][:k])) / max(min(len(base[q][:k]), k), 1)
                          for q in base if base[q]])
        rows.append((name, metrics[f"retrieval/recall_at_{k}"], metrics[f"retrieval/ndcg_at_{k}"],
                     metrics["retrieval/mrr_at_10"], common, wall))
    print(f"{'variant':45s} recall@{k}  ndcg@{k}  mrr@10  top-{k} in common with rank_bm25  wall s")
    for name, rec, ndcg, mrr, common, wall in rows:
        print(f"{name:45s} {rec:.4f}     {ndcg:.4f}   {mrr:.4f}  {common:.3f}                          {wall:.1f}")


if __name__ == "__main__":
    main()
