"""What the pipeline stores in the stage cache, and the integrity check of a stored index."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragbench.errors import IndexMismatchError
from ragbench.protocols import Embedder, Retriever
from ragbench.retrieval.vectors import open_vectors, spilled_file
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
    """Writes ``vectors.npy`` and ``ids.json``; vectors spilled to disk as they were encoded (a large
    corpus, ``ragbench.retrieval.vectors``) are moved into the entry, not written again."""
    ids, vectors = value
    spilled = spilled_file(vectors)
    if spilled is not None:
        os.replace(spilled, folder / "vectors.npy")
    else:
        np.save(folder / "vectors.npy", vectors)
    (folder / "ids.json").write_text(json.dumps(ids))


def load_vectors(folder: Path) -> tuple[list[str], np.ndarray]:
    """Ids and their vectors, memory-mapped read-only (a million 384-d rows are 1.5 GB: pages load as
    searches touch them); ValueError when they do not fit together (one 2-D row per id)."""
    ids = json.loads((folder / "ids.json").read_text())
    vectors = open_vectors(folder / "vectors.npy")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ValueError("ids.json is not a list of chunk ids")
    if vectors.ndim != 2 or vectors.shape[0] != len(ids):
        raise ValueError(f"vectors.npy has shape {vectors.shape} for {len(ids)} ids")
    return ids, vectors


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
    """Each query's hits; ValueError when a row is not a list of [chunk id, score] pairs."""
    rows = json.loads((folder / "hits.json").read_text())
    out = []
    for hits in _list(rows, "hits.json"):
        row = []
        for r, pair in enumerate(_list(hits, "a hits.json row")):
            chunk_id, score = _list(pair, "a hit")
            row.append(Hit(chunk_id=_str(chunk_id, "a hit's chunk id"), score=_number(score, "a hit's score"),
                           rank=r + 1))
        out.append(row)
    return out


def answer_record(answer: Answer) -> dict[str, Any]:
    u = answer.usage
    return {"text": answer.text, "model": answer.model, "latency_s": answer.latency_s,
            "citations": list(answer.citations),
            **({"cited": [[text, list(ns)] for text, ns in answer.cited]} if answer.cited else {}),
            "usage": {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                      "cost_usd": u.cost_usd}}


def answer_from(record: Any) -> Answer:
    """A cached answer: same text and usage, marked cached (its latency is the original one). A record
    of another shape raises ValueError/KeyError/TypeError: the cache counts it as corrupt."""
    u = record["usage"]
    return Answer(text=_str(record["text"], "text"), model=_str(record["model"], "model"),
                  latency_s=_number(record["latency_s"], "latency_s"),
                  citations=tuple(_int(n, "a citation") for n in _list(record["citations"], "citations")),
                  cited=tuple((_str(text, "a cited sentence"), tuple(_int(n, "a citation") for n in _list(ns, "cited")))
                              for text, ns in _list(record.get("cited") or [], "cited")),
                  usage=Usage(prompt_tokens=_int(u["prompt_tokens"], "prompt_tokens"),
                              completion_tokens=_int(u["completion_tokens"], "completion_tokens"),
                              cost_usd=_number(u["cost_usd"], "cost_usd"), cached=True))


VERDICT_NOTES = "_notes"  # a cached verdict's rubric names and reasoning, beside its scores


def verdict_from(record: Any) -> dict[str, float]:
    """A cached verdict: a mapping of score names to numbers (ValueError/TypeError otherwise)."""
    return verdict_with_notes(record)[0]


def verdict_with_notes(record: Any) -> tuple[dict[str, float], dict[str, Any]]:
    """A cached verdict's scores and its notes (``_notes``: rubric names, reasoning), shape-checked."""
    if not isinstance(record, dict):
        raise TypeError(f"a verdict is a JSON object of scores, not {type(record).__name__}")
    notes = record.get(VERDICT_NOTES) or {}
    if not isinstance(notes, dict):
        raise TypeError(f"a verdict's notes are a {type(notes).__name__}, not a JSON object")
    scores = {_str(k, "a score name"): _number(v, f"score {k}") for k, v in record.items() if k != VERDICT_NOTES}
    return scores, dict(notes)


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{what} is a {type(value).__name__}, not a list")
    return value


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} is a {type(value).__name__}, not a string")
    return value


def _int(value: Any, what: str) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} is a {type(value).__name__}, not an integer")
    return value


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} is a {type(value).__name__}, not a number")
    return float(value)


def texts_digest(texts: Sequence[str]) -> str:
    """SHA-256 over an ordered list of texts."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode())
        h.update(b"\0")
    return h.hexdigest()


def vectors_identity(embedder: Embedder, parent_vectors: str) -> str:
    """What the corpus vectors depend on: the embedder and how parents get theirs (retrieval.parent_vectors)."""
    return f"{embedder.identity}|parents={parent_vectors}"


def index_fingerprint(tree: ChunkTree, embedder: Embedder | None, retriever: Retriever, *,
                      scope: str = "corpus", parent_vectors: str = "none") -> str:
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
        "embedder": vectors_identity(embedder, parent_vectors) if embedder is not None and retriever.needs_vectors
        else None,
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
