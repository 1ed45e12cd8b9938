"""What the content hash costs: loading the cached corpus vectors of the LoCoMo sample with and without
the SHA-256 check of their files (and the hash computed once when the entry is written).

The vectors are random float32 of the real shape (one row per searchable chunk of the sample under the
default chunker, 384 columns as all-MiniLM-L6-v2): hashing and loading depend on the bytes, not on
their values, and no model is loaded. Prints milliseconds and the ratio checked/unchecked.

    python benchmarks/bench_cache_hash.py [--dataset locomo] [--dim 384] [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_module
from hydra.utils import instantiate

from ragbench.cache.entries import load_vectors, save_vectors
from ragbench.cache.files import MANIFEST, payload_hashes
from ragbench.cache.lock import hold
from ragbench.cache.store import StageCache


def searchable_ids(dataset: str) -> list[str]:
    with initialize_config_module("ragbench.conf", version_base="1.3"):
        cfg = compose("config", overrides=[f"dataset={dataset}"])
    docs = instantiate(cfg.dataset).load().documents
    return [c.chunk_id for c in instantiate(cfg.chunker).chunk(docs).searchable()]


def best_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="locomo")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    ids = searchable_ids(args.dataset)
    vectors = np.random.default_rng(0).standard_normal((len(ids), args.dim)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        cache = StageCache(dir=tmp)
        key = "0" * 64

        def read() -> None:
            cache.folder("index", key, {}, build=lambda: (ids, vectors), save=save_vectors,
                         load=lambda f, m: load_vectors(f))

        read()  # writes the entry
        folder = Path(tmp) / "index" / key
        size = sum(p.stat().st_size for p in folder.iterdir())
        plain = best_ms(lambda: load_vectors(folder), args.repeat)

        def unchecked() -> None:  # the read path without the hash: lock, holder note, manifest, load
            with hold(Path(tmp) / "index" / f"{key}.lock", timeout_s=5, what="bench"):
                json.loads((folder / MANIFEST).read_text())
                load_vectors(folder)

        before = best_ms(unchecked, args.repeat)
        checked = best_ms(read, args.repeat)
        hashing = best_ms(lambda: payload_hashes(folder), args.repeat)
    print(f"{args.dataset}: {len(ids)} vectors x {args.dim} ({size / 2**20:.1f} MiB on disk), median of {args.repeat}")
    print(f"  np.load + ids only              {plain:8.2f} ms")
    print(f"  cache read without hash check   {before:8.2f} ms")
    print(f"  cache read with hash check      {checked:8.2f} ms   (ratio {checked / before:.2f}x, "
          f"+{checked - before:.2f} ms per job that loads these vectors)")
    print(f"  hash at write time              {hashing:8.2f} ms   (once per entry)")


if __name__ == "__main__":
    main()
