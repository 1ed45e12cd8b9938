"""Ingest of a LoCoMo-sized corpus vs a bare ``SentenceTransformer.encode`` of the same texts.

    python benchmarks/bench_ingest.py [--repeat 3]

Both run in this process with the model already loaded. ragbench's ingest = load the dataset, build
the chunk tree, embed the searchable chunks (cache off). Prints the ratio (target <= 1.15).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from ragbench.cache.store import StageCache
    from ragbench.components import Components
    from ragbench.datasets.locomo import LocomoAdapter
    from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder
    from ragbench.ingest.hierarchical import HierarchicalChunker
    from ragbench.pipeline import Pipeline
    from ragbench.retrieval.dense import FaissRetriever

    adapter = LocomoAdapter(name="locomo")
    chunker = HierarchicalChunker()
    emb = SentenceTransformerEmbedder(show_progress=False)
    st = emb._load()  # noqa: SLF001 - the same loaded model for both sides
    texts = [c.text for c in chunker.chunk(adapter.load().documents).searchable()]
    st.encode(texts[:64], batch_size=emb.batch_size)  # warm-up

    bare, ours = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        st.encode(texts, batch_size=emb.batch_size, normalize_embeddings=True, convert_to_numpy=True)
        bare.append(time.perf_counter() - start)

        pipe = Pipeline(Components(dataset=adapter, chunker=chunker, embedder=emb, retriever=FaissRetriever(),
                                   topk=5, rerankers=[], candidates=0, expander=None, generator=None, judges={}),
                        cache=StageCache(mode="off"))
        start = time.perf_counter()
        evalset = adapter.load()
        tree = chunker.chunk(evalset.documents)
        chunks = tree.searchable()
        pipe._vectors("bench", tree, [c.chunk_id for c in chunks], [c.text for c in chunks])  # noqa: SLF001
        ours.append(time.perf_counter() - start)
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"texts: {len(texts)}")
    print(f"bare SentenceTransformer.encode: {b:.2f}s (median of {args.repeat}: {', '.join(f'{x:.2f}' for x in bare)})")
    print(f"ragbench ingest (load+chunk+embed): {o:.2f}s ({', '.join(f'{x:.2f}' for x in ours)})")
    print(f"RATIO ingest / bare encode = {o / b:.3f} (target <= 1.15)")


if __name__ == "__main__":
    main()
