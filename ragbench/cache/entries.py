"""What the pipeline stores in the stage cache, and the integrity check of a stored index."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragbench.errors import IndexMismatchError
from ragbench.protocols import Embedder, Retriever
from ragbench.types import Answer, ChunkTree, Document, Hit, Usage

INDEX_SCHEMA = 1
LIBRARIES = ("sentence-transformers", "transformers", "torch", "numpy", "faiss-cpu")


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries that shape vectors (read from metadata: no imports)."""
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def save_vectors(value: tuple[list[str], np.ndarray], folder: Path) -> None:
    ids, vectors = value
    np.save(folder / "vectors.npy", vectors)
    (folder / "ids.json").write_text(json.dumps(ids))


def load_vectors(folder: Path) -> tuple[list[str], np.ndarray]:
    return json.loads((folder / "ids.json").read_text()), np.load(folder / "vectors.npy")


def check_index(manifest: Mapping[str, Any], expected: Mapping[str, Any], folder: Path) -> None:
    """Refuses a stored index built with other settings: names what differs and how to rebuild."""
    diffs = []
    for key, want in expected.items():
        have = manifest.get(key)
        if have != want:
            diffs.append(f"{key}: stored {have!r}, now {want!r}")
    if diffs:
        raise IndexMismatchError(
            f"the cached index at {folder} was built with other settings:\n  " + "\n  ".join(diffs)
            + "\n  fix: rebuild it with cache.mode=refresh (or delete that folder); results from a mismatched "
            "index would be silently wrong"
        )


def save_hits(value: list[list[Hit]], folder: Path) -> None:
    rows = [[[h.chunk_id, h.score] for h in hits] for hits in value]
    (folder / "hits.json").write_text(json.dumps(rows))


def load_hits(folder: Path) -> list[list[Hit]]:
    rows = json.loads((folder / "hits.json").read_text())
    return [[Hit(chunk_id=c, score=float(s), rank=r + 1) for r, (c, s) in enumerate(hits)] for hits in rows]


def answer_record(answer: Answer) -> dict[str, Any]:
    u = answer.usage
    return {"text": answer.text, "model": answer.model, "latency_s": answer.latency_s,
            "citations": list(answer.citations),
            "usage": {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                      "cost_usd": u.cost_usd}}


def answer_from(record: Mapping[str, Any]) -> Answer:
    """A cached answer: same text and usage, marked cached (its latency is the original one)."""
    u = record["usage"]
    return Answer(text=record["text"], model=record["model"], latency_s=float(record["latency_s"]),
                  citations=tuple(record["citations"]),
                  usage=Usage(prompt_tokens=int(u["prompt_tokens"]), completion_tokens=int(u["completion_tokens"]),
                              cost_usd=float(u["cost_usd"]), cached=True))


def texts_digest(texts: Sequence[str]) -> str:
    """SHA-256 over an ordered list of texts."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode())
        h.update(b"\0")
    return h.hexdigest()


def index_fingerprint(tree: ChunkTree, embedder: Embedder | None, retriever: Retriever, *,
                      scope: str = "corpus") -> str:
    """SHA-256 over searchable chunk ids and texts, embedder identity, index params and, when it is
    not the whole corpus, the retrieval scope (never top-k)."""
    h = hashlib.sha256()
    for c in tree.searchable():
        h.update(c.chunk_id.encode())
        h.update(b"\0")
        h.update(c.text.encode())
        h.update(b"\n")
    meta = {
        "schema": INDEX_SCHEMA,
        "embedder": embedder.identity if embedder is not None and retriever.needs_vectors else None,
        "retriever": dict(retriever.params()),
        **({"scope": scope} if scope != "corpus" else {}),
    }
    h.update(json.dumps(meta, sort_keys=True).encode())
    return h.hexdigest()


def corpus_digest(docs: Sequence[Document]) -> str:
    """SHA-256 over the documents' ids, titles and texts: the corpus part of the dataset. Questions
    and the question sampling spec are left out, so sampling questions never re-embeds the corpus."""
    h = hashlib.sha256()
    for doc in docs:
        h.update(f"D\0{doc.doc_id}\0{doc.title}\0{doc.text or ''}\0{sorted(doc.meta.items())}\n".encode())
        for sec in doc.sections:
            h.update(f"S\0{sec.title}\0{sec.ref}\0{sorted(sec.meta.items())}\n".encode())
            for para in sec.paragraphs:
                h.update(f"P\0{para.ref}\0{para.text}\0{sorted(para.meta.items())}\n".encode())
    return h.hexdigest()
