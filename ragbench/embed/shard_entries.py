"""Corpus vectors encoded in shards by several jobs (``stages=encode embedder.shard=i/n``, on any launcher's
workers): each shard's stage-cache entry, and their assembly into the corpus's index entry by the first job
that needs the vectors (nothing encoded there). A shard's key is the index key and ``i/n``: the searching
job's own keys and identity never depend on whether its vectors came from shards."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragbench.cache.entries import check_index, load_vectors, save_vectors
from ragbench.cache.files import MANIFEST
from ragbench.cache.store import StageCache, make_key
from ragbench.embed.shard import KEY, EncodeShard, encode_block, sweep_values
from ragbench.errors import CacheError, IndexMismatchError
from ragbench.retrieval.vectors import concat_to_file, encode_to_file

log = logging.getLogger(__name__)

STAGE = "index_shard"
Encode = Callable[[Sequence[str]], np.ndarray]


def shard_key(index_key: str, shard: EncodeShard) -> str:
    return make_key({"stage": STAGE, "index": index_key, "shard": shard.index, "of": shard.count})


def shard_manifest(expected: Mapping[str, Any], index_key: str, shard: EncodeShard, rows: range) -> dict[str, Any]:
    """What a shard entry holds: the index entry's settings (``expected``), its key and the shard's rows."""
    return {**expected, "index_key": index_key, "shard": shard.index, "of": shard.count,
            "rows": [rows.start, rows.stop]}


@dataclass(frozen=True)
class StoredShard:
    """A shard in the cache: its rows of the corpus, whether it was there already, its vectors' width."""

    rows: range
    hit: bool
    dim: int  # 0 for a shard without rows


def store_shard(cache: StageCache, *, index_key: str, expected: Mapping[str, Any], shard: EncodeShard,
                ids: Sequence[str], texts: Sequence[str], spill_rows: int, encode: Encode) -> StoredShard:
    """Encodes ``shard``'s rows of the corpus into its cache entry (loaded instead when it is there), in the
    encode blocks of a full encode (``encode_block``), so its vectors are that encode's bytes."""
    rows = shard.rows(len(texts), spill_rows)
    manifest = shard_manifest(expected, index_key, shard, rows)
    if not rows:
        log.info("%s=%s: no rows to encode (the corpus's %d texts make %d encode block(s) of up to %d); its entry "
                 "is empty", KEY, shard.label, len(texts), -(-len(texts) // encode_block(len(texts), spill_rows)),
                 encode_block(len(texts), spill_rows))

    def build() -> tuple[list[str], np.ndarray]:
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        spill = cache.dir / STAGE if cache.writes else None  # moved into the entry by save_vectors
        return list(ids[rows.start: rows.stop]), encode_to_file(
            encode, texts[rows.start: rows.stop], spill, block=encode_block(len(texts), spill_rows))

    (_, vectors), hit = cache.folder(STAGE, shard_key(index_key, shard), manifest, build=build, save=save_vectors,
                                     load=lambda folder, stored: _load(folder, stored, manifest, ids))
    return StoredShard(rows=rows, hit=hit, dim=int(vectors.shape[1]) if len(vectors) else 0)


def _load(folder: Path, stored: Mapping[str, Any], manifest: Mapping[str, Any],
          ids: Sequence[str]) -> tuple[list[str], np.ndarray]:
    check_index(stored, manifest, folder)  # another embedder, corpus or row range: named, with the fix
    start, stop = manifest["rows"]
    shard_ids, vectors = load_vectors(folder)
    if shard_ids != list(ids[start: stop]):
        raise IndexMismatchError(f"the cached index shard at {folder} holds other chunk ids than rows {start}-{stop} "
                                 "of this corpus; fix: rebuild it with cache.mode=refresh")
    return shard_ids, vectors


def assemble(cache: StageCache, *, index_key: str, expected: Mapping[str, Any], ids: Sequence[str],
             spill_rows: int, spill: Path | None) -> np.ndarray | None:
    """The corpus vectors concatenated from their shards in the cache (a spilled ``.npy`` under ``spill``, for
    the index entry), or None when no shard of ``index_key`` is there. Some shards there but not all: one line
    naming the missing ones and the command that encodes them."""
    if not cache.reads:
        return None
    found = _shards(cache.dir, lambda m: m.get("index_key") == index_key)
    if not found:
        _other_settings(cache.dir, expected)
        return None
    count = min(found, key=lambda n: (n - len(found[n]), n))  # the most complete set; of equals, fewer shards
    missing = [EncodeShard(i, count) for i in range(count) if i not in found[count]]
    if missing:
        raise CacheError(_missing_line(cache.dir, missing, count, len(found[count])))
    parts = []
    for i in range(count):
        shard = EncodeShard(i, count)
        manifest = shard_manifest(expected, index_key, shard, shard.rows(len(ids), spill_rows))

        def gone(shard: EncodeShard = shard) -> tuple[list[str], np.ndarray]:  # removed (or corrupt) since listed
            raise CacheError(_missing_line(cache.dir, [shard], count, count - 1))

        def load(folder: Path, stored: Mapping[str, Any], m: Mapping[str, Any] = manifest) -> tuple[list[str], np.ndarray]:
            return _load(folder, stored, m, ids)

        (_, vectors), _ = cache.folder(STAGE, shard_key(index_key, shard), manifest, build=gone, save=save_vectors,
                                       load=load)
        parts.append(vectors)
    log.info("corpus vectors assembled from %d shards in %s (nothing encoded)", count, cache.dir / STAGE)
    return concat_to_file(parts, spill)


def shard_stored(cache_dir: str | Path, tags: Mapping[str, str], run_id: str) -> bool:
    """Whether the shard a finished ``stages=encode`` run encoded (its ``ragbench.cache_key.index_shard``
    tag) is in the cache at ``cache_dir``. Resume follows the cache: a run that encoded into another cache
    (another ``cache.dir``, or an entry since pruned) did not fill this one, so the job runs again."""
    key = tags.get(f"ragbench.cache_key.{STAGE}")
    if key and (Path(cache_dir).expanduser() / STAGE / key / MANIFEST).is_file():
        return True
    log.info("job already finished as MLflow run %s, but its index shard is not in the cache at %s (another "
             "cache.dir, or pruned): encoding it again", run_id, cache_dir)
    return False


def _missing_line(root: Path, missing: Sequence[EncodeShard], count: int, present: int) -> str:
    labels = ",".join(s.label for s in missing)
    return (f"index shard(s) {labels} of this corpus are missing from the cache at {root} ({present} of {count} "
            f"there); fix: encode them with this job's dataset, chunker and embedder settings: python -m ragbench -m "
            f"stages=encode {KEY}={labels} cache.dir={root} ... (all {count}: {KEY}={sweep_values(count)}), or remove "
            f"the shards (python -m ragbench.cache --dir {root} prune --older-than 0 --stage {STAGE}) to encode the "
            "whole corpus in this job")


def _shards(root: Path, keep: Callable[[Mapping[str, Any]], bool]) -> dict[int, dict[int, Mapping[str, Any]]]:
    """The shard entries whose manifest ``keep`` accepts, by shard count and shard number."""
    out: dict[int, dict[int, Mapping[str, Any]]] = {}
    folder = root / STAGE
    if not folder.is_dir():
        return out
    for entry in folder.iterdir():
        if entry.name.startswith(".") or not entry.is_dir():
            continue  # temporary build folders, spilled files, locks
        try:
            manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(manifest, dict) and keep(manifest) and isinstance(manifest.get("of"), int) \
                and isinstance(manifest.get("shard"), int):
            out.setdefault(manifest["of"], {})[manifest["shard"]] = manifest
    return out


def _other_settings(root: Path, expected: Mapping[str, Any]) -> None:
    """One warning when the cache holds shards of this corpus made with other settings (another embedder,
    other library versions): the job encodes the whole corpus itself, which a cluster user rarely wants."""
    other = _shards(root, lambda m: m.get("chunks_key") == expected.get("chunks_key"))
    if not other:
        return
    manifests = [m for by_index in other.values() for m in by_index.values()]
    differ = sorted({k for m in manifests for k in ("embedder", "parent_vectors", "libraries", "count")
                     if m.get(k) != expected.get(k)})
    stored = sorted({str(m.get("embedder")) for m in manifests})
    log.warning("the cache at %s holds %d index shard(s) of this corpus made with other settings (%s; embedder "
                "%s, this job's %s): they are not used, this job encodes the whole corpus; fix: encode shards "
                "with this job's embedder settings (stages=%s %s=...), or run this job with the shards' settings",
                root, len(manifests), ", ".join(differ) or "another index", "; ".join(stored),
                expected.get("embedder"), "encode", KEY)
