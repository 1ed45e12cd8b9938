"""Incremental indexing: the corpus vectors as per-document pieces of the stage cache.

A piece (stage ``doc_vectors``) holds one document's searchable chunk ids and vectors, keyed by the SHA-256 of
the document's content (``document_sha256``), the chunker's params, the vectors' identity (embedder, parent
vectors) and the libraries' versions. When the whole-corpus index entry misses (a corpus whose one file
changed), the index is assembled from the pieces: only the documents without a piece are encoded. Each piece's
manifest names its document (``doc_id``, ``dataset``, hash, chunk count): ``python -m ragbench.cache docs``
lists them and ``forget DOC`` drops them (``ragbench.cache.doc_inventory``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ragbench.cache.entries import corpus_digest, library_versions, load_vectors, save_vectors, texts_digest
from ragbench.cache.files import MANIFEST
from ragbench.cache.store import StageCache, make_key
from ragbench.types import ChunkTree, Document

STAGE = "doc_vectors"
# a piece costs about 2 ms to write and 0.8 ms to read (2,000 documents of 5 chunks: 4.0 s and 1.6 s), so
# more documents than MAX_PIECES, or documents of fewer than MIN_CHUNKS searchable chunks on average (passage
# corpora such as BEIR's), are encoded as one whole-corpus entry, as before
MAX_PIECES = 5000
MIN_CHUNKS = 8
DOCUMENTS = "documents"  # the index manifest's {doc_id: document_sha256} of an index assembled from pieces


def document_sha256(doc: Document) -> str:
    """SHA-256 of one document's content: its id, title, text, sections, paragraphs and metadata."""
    return corpus_digest([doc])


def piece_key(doc_sha: str, chunker: Mapping[str, Any], vectors: str,
              libraries: Mapping[str, str] | None = None) -> str:
    """One document's piece: its content, how it is chunked, what embeds it (and the vector libraries)."""
    return make_key({"stage": STAGE, "document": doc_sha, "chunker": dict(chunker), "embedder": vectors,
                     "libraries": dict(libraries if libraries is not None else library_versions())})


@dataclass(frozen=True)
class Piece:
    """One document's searchable chunks: their rows in the corpus's id list, ids and texts."""

    doc_id: str
    rows: list[int]
    ids: list[str]
    texts: list[str]


def pieces_of(tree: ChunkTree, ids: Sequence[str], texts: Sequence[str]) -> list[Piece]:
    """The searchable chunks grouped by document, in first-seen order (each row in exactly one piece)."""
    rows: dict[str, list[int]] = {}
    for i, cid in enumerate(ids):
        rows.setdefault(tree[cid].doc_id, []).append(i)
    return [Piece(doc, r, [ids[i] for i in r], [texts[i] for i in r]) for doc, r in rows.items()]


def assemble(cache: StageCache, *, tree: ChunkTree, ids: Sequence[str], texts: Sequence[str],
             documents: Sequence[Document], chunker: Mapping[str, Any], vectors: str, dataset: str,
             encode: Callable[[list[str]], np.ndarray],
             index_manifest: MutableMapping[str, Any] | None = None) -> np.ndarray:
    """The corpus vectors in ``ids`` order, each document's rows from its piece (encoded with ``encode`` only
    when it has none). ``index_manifest`` (the whole-corpus entry's, written after) gets the documents it was
    assembled from, so ``cache forget`` can drop that entry too. Without the documents (or with too many),
    the corpus is encoded at once."""
    by_id = {d.doc_id: d for d in documents}
    pieces = pieces_of(tree, ids, texts)
    if ((not cache.writes and not cache.reads) or len(pieces) > MAX_PIECES or len(ids) < MIN_CHUNKS * len(pieces)
            or any(p.doc_id not in by_id for p in pieces)):
        return encode(list(texts))
    hashes = {p.doc_id: document_sha256(by_id[p.doc_id]) for p in pieces}
    libraries = library_versions()
    keys = {doc: piece_key(sha, chunker, vectors, libraries) for doc, sha in hashes.items()}
    missing = [p for p in pieces if not (cache.reads and (cache.dir / STAGE / keys[p.doc_id]).is_dir())]
    # the documents without a piece, encoded in one call (as the whole corpus was: the same batches and
    # each distinct text once); a piece that fails its check on load is encoded on its own
    fresh: dict[str, np.ndarray] = {}
    if missing:
        together = encode([t for p in missing for t in p.texts])
        start = 0
        for p in missing:
            fresh[p.doc_id], start = together[start: start + len(p.texts)], start + len(p.texts)

    def encoded(doc: str, texts: list[str]) -> np.ndarray:
        return fresh.pop(doc) if doc in fresh else encode(texts)

    out: np.ndarray | None = None
    for piece in pieces:
        vecs = _piece(cache, piece, keys[piece.doc_id], hashes[piece.doc_id], chunker=chunker, vectors=vectors,
                      dataset=dataset, encode=partial(encoded, piece.doc_id))
        if out is None:
            out = np.empty((len(ids), vecs.shape[1]), dtype=vecs.dtype)
        out[piece.rows] = vecs
    if index_manifest is not None:
        index_manifest[DOCUMENTS] = hashes
    return out if out is not None else encode([])


def _piece(cache: StageCache, piece: Piece, key: str, sha: str, *, chunker: Mapping[str, Any], vectors: str, dataset: str,
           encode: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    digest = texts_digest(piece.texts)
    manifest = {"doc_id": piece.doc_id, "dataset": dataset, "document_sha256": sha, "chunks": len(piece.ids),
                "texts_sha256": digest, "embedder": vectors, "chunker": dict(chunker)}

    def load(folder: Path, stored: Mapping[str, Any]) -> np.ndarray:
        stored_ids, vecs = load_vectors(folder)
        if stored_ids != piece.ids or stored.get("texts_sha256") != digest:  # a chunker that is not deterministic
            raise ValueError(f"it holds other chunks of {piece.doc_id!r} than this chunking makes")
        return np.asarray(vecs)

    (_, vecs), _ = cache.folder(STAGE, key, manifest,
                                build=lambda: (piece.ids, encode(piece.texts)), save=save_vectors,
                                load=lambda f, m: (piece.ids, load(f, m)))
    return np.asarray(vecs)


def read_manifest(folder: Path) -> dict[str, Any]:
    """An entry folder's manifest ({} when unreadable)."""
    try:
        value = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
