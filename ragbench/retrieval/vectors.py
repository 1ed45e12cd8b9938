"""Vectors on disk: written block by block as they are encoded, memory-mapped, and searched exactly in
row blocks, so a million 384-d vectors (1.5 GB of float32) never need a second copy in memory."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ragbench.errors import RagbenchError

# Texts encoded per call when the corpus is spilled to disk; a corpus of at most this many texts is
# encoded in one call, in memory, exactly as before (same calls, same bytes).
SPILL_ROWS = 65_536
# Rows per block of an exact (flat) search over a memory-mapped matrix: a multiple of faiss's own
# database tile (1,024 rows), so each score is the same float as IndexFlatIP's.
SEARCH_BLOCK_ROWS = 65_536


def encode_to_file(encode: Callable[[Sequence[str]], np.ndarray], texts: Sequence[str], folder: Path | None, *,
                   block: int = SPILL_ROWS) -> np.ndarray:
    """``encode(texts)`` block by block into a float32 ``.npy`` under ``folder``, memory-mapped.

    With a ``folder`` (the stage cache's, same file system) the file stays there for the cache to move
    into its entry (``save_vectors``); without one it is a temp file unlinked at once (the mapping
    keeps it alive until the array is dropped)."""
    if not texts:
        raise RagbenchError("no texts to encode; fix: check the dataset and chunker")
    first = np.asarray(encode(texts[:block]), dtype=np.float32)
    if first.ndim != 2 or first.shape[0] != min(block, len(texts)):
        raise RagbenchError(f"the embedder returned shape {first.shape} for {min(block, len(texts))} texts")

    def fill(out: np.ndarray) -> None:
        out[: len(first)] = first
        for start in range(block, len(texts), block):
            part = np.asarray(encode(texts[start: start + block]), dtype=np.float32)
            out[start: start + len(part)] = part

    return _spilled(folder, (len(texts), first.shape[1]), fill)


def _spilled(folder: Path | None, shape: tuple[int, int], fill: Callable[[np.ndarray], None]) -> np.ndarray:
    """A float32 ``.npy`` of ``shape`` under ``folder`` (without one, a temp file unlinked at once: the mapping
    keeps it alive), memory-mapped and filled by ``fill``; the file is removed when filling fails."""
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".spill-", suffix=".npy", dir=folder)
    os.close(fd)
    out = np.lib.format.open_memmap(name, mode="w+", dtype=np.float32, shape=shape)
    if folder is None:
        os.unlink(name)
    try:
        fill(out)
        out.flush()
    except BaseException:
        if folder is not None:
            Path(name).unlink(missing_ok=True)
        raise
    return out


def concat_to_file(parts: Sequence[np.ndarray], folder: Path | None, *, block: int = SEARCH_BLOCK_ROWS) -> np.ndarray:
    """The row-wise concatenation of ``parts`` (memory-mapped shards) in a spilled ``.npy`` under ``folder``,
    as ``encode_to_file`` leaves it (copied ``block`` rows at a time: one block in memory); rows-only
    parts (shape ``(0, 0)``: a shard without rows) are skipped."""
    full = [p for p in parts if len(p)]
    if not full:
        raise RagbenchError("no vectors to concatenate; fix: check the dataset and chunker")
    dims = {int(p.shape[1]) for p in full}
    if len(dims) != 1:
        raise RagbenchError(f"the shards hold vectors of different widths {sorted(dims)}; fix: rebuild them with "
                            "cache.mode=refresh")

    def fill(out: np.ndarray) -> None:
        row = 0
        for part in full:
            for start in range(0, len(part), block):
                chunk = np.asarray(part[start: start + block], dtype=np.float32)
                out[row: row + len(chunk)] = chunk
                row += len(chunk)

    return _spilled(folder, (sum(map(len, full)), dims.pop()), fill)


def spilled_file(vectors: np.ndarray) -> Path | None:
    """The ``.npy`` file a spilled matrix (``encode_to_file``) maps, while it still exists."""
    if isinstance(vectors, np.memmap) and vectors.filename and Path(vectors.filename).name.startswith(".spill-"):
        path = Path(vectors.filename)
        return path if path.exists() else None
    return None


def open_vectors(path: Path) -> np.ndarray:
    """A stored ``.npy`` matrix, memory-mapped read-only (pages load as searches touch them)."""
    return np.load(path, mmap_mode="r", allow_pickle=False)


def exact_search(vectors: np.ndarray, queries: np.ndarray, k: int, *,
                 block: int = SEARCH_BLOCK_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """Inner-product top ``k`` of every query over ``vectors``, one row block at a time (faiss's
    ``knn`` on each block, merged): faiss's ``IndexFlatIP.search`` result without copying ``vectors``
    into an index. Rows are ordered by score descending, then row ascending; -1 pads past the end."""
    import faiss

    nq = len(queries)
    best_s = np.full((nq, k), -np.inf, dtype=np.float32)
    best_i = np.full((nq, k), -1, dtype=np.int64)
    q = np.ascontiguousarray(queries, dtype=np.float32)
    for start in range(0, len(vectors), block):
        part = np.ascontiguousarray(vectors[start: start + block], dtype=np.float32)
        depth = min(k, len(part))
        s, i = faiss.knn(q, part, depth, metric=faiss.METRIC_INNER_PRODUCT)
        i = np.where(i >= 0, i + start, -1)
        s = np.concatenate([best_s, s], axis=1)
        i = np.concatenate([best_i, i], axis=1)
        order = np.lexsort((np.where(i < 0, np.iinfo(np.int64).max, i), -s), axis=-1)[:, :k]
        best_s = np.take_along_axis(s, order, axis=1)
        best_i = np.take_along_axis(i, order, axis=1)
    best_s[best_i < 0] = -np.inf
    return best_s, best_i


class BlockFlatIndex:
    """A faiss-like exact index over a (memory-mapped) matrix that it reads in place: ``search`` as
    faiss's ``IndexFlatIP.search`` (missing rows: -1 and a score of -inf)."""

    def __init__(self, vectors: np.ndarray, *, block: int = SEARCH_BLOCK_ROWS) -> None:
        self.vectors = vectors
        self.block = block
        self.ntotal = len(vectors)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return exact_search(self.vectors, queries, k, block=self.block)
