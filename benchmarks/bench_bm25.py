"""BM25 speed: ms per query, batched, over a >= 20,000-chunk synthetic corpus (target <= 1 ms).

The corpus is synthetic but realistic: an order-2 word Markov chain trained on the sentences of the
sample datasets (LoCoMo turns, Qasper paragraphs, syllabi, FinanceBench evidence) writes unique
chunks of 2-3 sentences; each query is one sentence of a chunk with ~25% of its words dropped, and
that chunk is its one relevant id. ``bench_retrieval.py`` reuses ``synthetic_corpus``.

    python benchmarks/bench_bm25.py [--chunks 20000] [--queries 1000] [--data FOLDER]
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import random
import re
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

# the dataset samples bundled in the package (any folder of dataset files works: --data)
DEFAULT_DATA = os.environ.get(
    "RAGBENCH_BENCH_DATA", str(Path(__file__).resolve().parents[1] / "ragbench" / "datasets" / "samples")
)
_SPLIT = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class SyntheticCorpus:
    """Chunk ids/texts plus queries with their single relevant chunk."""

    ids: list[str]
    texts: list[str]
    query_ids: list[str]
    query_texts: list[str]
    qrels: dict[str, dict[str, int]]


def source_sentences(root: str) -> list[str]:
    """Sentences (>= 4 words) from the sample datasets under ``root``."""
    out: list[str] = []
    for path in glob.glob(f"{root}/locomo/data/*.json"):
        for conv in json.loads(Path(path).read_text(encoding="utf-8")):
            for value in conv["conversation"].values():
                if isinstance(value, list):
                    out += [turn["text"] for turn in value]
    for path in glob.glob(f"{root}/qasper/*.json"):
        for paper in json.loads(Path(path).read_text(encoding="utf-8")).values():
            for section in paper["full_text"]:
                for para in section["paragraphs"]:
                    out += _SPLIT.split(para)
    for path in glob.glob(f"{root}/syllabusqa/syllabi/syllabi_redacted/text/*.txt"):
        out += Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    for path in glob.glob(f"{root}/financebench/data/financebench_open_source.jsonl"):
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            for ev in json.loads(line).get("evidence", []):
                out += _SPLIT.split(ev.get("evidence_text", ""))
    sentences = sorted({s.strip() for s in out if len(s.split()) >= 4})
    if len(sentences) < 200:
        raise SystemExit(
            f"only {len(sentences)} sentences found under {root}; pass --data with the datasets folder"
        )
    return sentences


def synthetic_corpus(
    n_chunks: int, n_queries: int, *, data: str = DEFAULT_DATA, seed: int = 0
) -> SyntheticCorpus:
    """A reproducible corpus of unique Markov-chain chunks and queries drawn from them."""
    rng = random.Random(seed)
    chain: dict[tuple[str, str], list[str]] = defaultdict(list)
    starts: list[tuple[str, str]] = []
    for s in source_sentences(data):
        words = s.split()
        starts.append((words[0], words[1]))
        for a, b, c in zip(words[:-1], words[1:], [*words[2:], ""], strict=True):
            chain[(a, b)].append(c)

    def sentence() -> str:
        while True:
            a, b = rng.choice(starts)
            words = [a, b]
            while len(words) < 40:
                nxt = rng.choice(chain[(a, b)])
                if not nxt:
                    break
                words.append(nxt)
                a, b = b, nxt
            if len(words) >= 6:
                return " ".join(words)

    ids: list[str] = []
    texts: list[str] = []
    sents: list[list[str]] = []
    seen: set[str] = set()
    while len(texts) < n_chunks:
        parts = [sentence() for _ in range(rng.randint(2, 3))]
        text = " ".join(parts)
        if text in seen:
            continue
        seen.add(text)
        ids.append(f"c{len(ids):06d}")
        texts.append(text)
        sents.append(parts)
    query_ids, query_texts, qrels = [], [], {}
    for n, i in enumerate(rng.sample(range(n_chunks), n_queries)):
        words = rng.choice(sents[i]).split()
        kept = [w for w in words if rng.random() > 0.25] or words
        qid = f"q{n:05d}"
        query_ids.append(qid)
        query_texts.append(" ".join(kept))
        qrels[qid] = {ids[i]: 1}
    return SyntheticCorpus(ids, texts, query_ids, query_texts, qrels)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", default=DEFAULT_DATA)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from ragbench.judge.ir import retrieval_metrics
    from ragbench.retrieval.bm25 import BM25Retriever

    corpus = synthetic_corpus(args.chunks, args.queries, data=args.data)
    words = sum(len(t.split()) for t in corpus.texts) / len(corpus.texts)
    print(f"corpus: {len(corpus.texts)} chunks, {words:.1f} words/chunk; {len(corpus.query_texts)} queries")

    retriever = BM25Retriever()
    t0 = time.perf_counter()
    retriever.build(ids=corpus.ids, texts=corpus.texts, vectors=None)
    build_s = time.perf_counter() - t0
    print(f"build (tokenize + index): {build_s:.2f} s")

    best = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        results = retriever.search(texts=corpus.query_texts, vectors=None, k=args.k)
        best = min(best, time.perf_counter() - t0)
    ms = best * 1000 / len(corpus.query_texts)
    hit = sum(
        retrieval_metrics([h.chunk_id for h in hits], corpus.qrels[q], [args.k])[f"hit_at_{args.k}"]
        for q, hits in zip(corpus.query_ids, results, strict=True)
    ) / len(results)
    print(f"search, batched, k={args.k}: {ms:.3f} ms/query (best of {args.repeat}, incl. query tokenizing)")
    print(f"ratio to the 1 ms target: {ms / 1.0:.2f}  ({'meets' if ms <= 1.0 else 'misses'} the target)")
    print(f"sanity: hit@{args.k} on the synthetic queries = {hit:.3f}")


if __name__ == "__main__":
    main()
