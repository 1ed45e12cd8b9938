"""The indexed documents of the stage cache (``python -m ragbench.cache docs``), dropping one document's
entries (``forget DOC``) and clearing the whole cache (``reset``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from ragbench.cache.documents import DOCUMENTS, STAGE, read_manifest
from ragbench.cache.inventory import PruneResult, _remove, entries, prune, stages
from ragbench.errors import CacheError

INDEX = "index"
MIN_SHA_PREFIX = 8  # a document named by its hash: at least this many hex digits


@dataclass(frozen=True)
class DocPiece:
    """One indexed document's piece: which dataset, its id, hash, searchable chunks, what embedded them."""

    dataset: str
    doc_id: str
    sha256: str
    chunks: int
    embedder: str
    path: Path
    key: str


def doc_pieces(root: Path, dataset: str | None = None) -> list[DocPiece]:
    """Every per-document piece, by dataset and document id; ``dataset``: only that dataset's (a name the
    cache does not hold is a CacheError listing the ones it does)."""
    found = []
    if STAGE in stages(root):
        for entry in entries(root, STAGE):
            m = read_manifest(entry.path)
            found.append(DocPiece(str(m.get("dataset", "?")), str(m.get("doc_id", "?")),
                                  str(m.get("document_sha256", "")), int(m.get("chunks") or 0),
                                  str(m.get("embedder", "")), entry.path, entry.key))
    found.sort(key=lambda p: (p.dataset, p.doc_id, p.embedder, p.sha256))
    if dataset is not None and not any(p.dataset == dataset for p in found):
        names = sorted({p.dataset for p in found})
        raise CacheError(f"--dataset {dataset!r} has no indexed documents in the cache at {root}; "
                         + (f"its datasets are: {', '.join(names)}" if names else
                            "it holds none yet: run a job first (python -m ragbench dataset=NAME)"))
    return [p for p in found if dataset is None or p.dataset == dataset]


@dataclass(frozen=True)
class Forgotten:
    """What ``forget`` removed: the document's pieces and the whole-corpus index entries assembled from them."""

    pieces: int
    indexes: int
    skipped_locked: int


def matches(piece: DocPiece, doc: str) -> bool:
    """``doc`` names the piece's document: its id, or (8+ hex digits) a prefix of its SHA-256."""
    if piece.doc_id == doc:
        return True
    return len(doc) >= MIN_SHA_PREFIX and piece.sha256.startswith(doc.lower())


def forget(root: Path, doc: str, *, dataset: str | None = None) -> Forgotten:
    """Drops ``doc``'s pieces and every index entry that was assembled with it: the next job re-encodes
    that document's chunks. An unknown document is a CacheError naming the command that lists them."""
    pieces = [p for p in doc_pieces(root, dataset) if matches(p, doc)]
    if not pieces:
        where = f" of dataset {dataset!r}" if dataset else ""
        raise CacheError(f"no indexed document {doc!r}{where} in the cache at {root}; list them with "
                         "`python -m ragbench.cache docs` and pass a document id or 8+ digits of its sha256")
    gone = {(p.doc_id, p.sha256) for p in pieces}
    removed = skipped = indexes = 0
    for piece in pieces:
        ok = _remove_locked(root / STAGE, piece.key, piece.path)
        removed += ok
        skipped += not ok
    if INDEX in stages(root):
        for entry in entries(root, INDEX):
            held = read_manifest(entry.path).get(DOCUMENTS)
            if isinstance(held, dict) and any(held.get(d) == sha for d, sha in gone):
                ok = _remove_locked(root / INDEX, entry.key, entry.path)
                indexes += ok
                skipped += not ok
    return Forgotten(removed, indexes, skipped)


def _remove_locked(stage_dir: Path, key: str, path: Path) -> bool:
    """Removes an entry folder under its builder's lock; False when a running job holds it."""
    lock = FileLock(str(stage_dir / f"{key}.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return False
    try:
        _remove(path)
    finally:
        lock.release()
    return True


def reset(root: Path) -> PruneResult:
    """Removes every entry of every stage (entries a running job holds are skipped and counted); the
    download cache is not a stage and stays."""
    return prune(root, older_than_s=-1e12)
