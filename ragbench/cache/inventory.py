"""What the stage cache holds (entries, size and age per stage) and removal of old entries by age.

Removal never lets a reader see a half-deleted entry, and skips entries a running job holds locked.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from ragbench.cache.files import MANIFEST
from ragbench.cache.lock import HOLDER_SUFFIX
from ragbench.cache.root import DOWNLOADS
from ragbench.errors import CacheError

_KEY = re.compile(r"^[0-9a-f]{64}$")
_SHARD = re.compile(r"^[0-9a-f]{2}$")
TEMP_GRACE_S = 60.0  # a half-written record younger than this may still be in flight


@dataclass(frozen=True)
class Entry:
    """One cache entry: a ``<stage>/<key>/`` folder or a ``<stage>/<xx>/<key>.json`` record."""

    stage: str
    key: str
    path: Path
    size: int
    created: float

    @property
    def is_folder(self) -> bool:
        return self.path.is_dir()


@dataclass(frozen=True)
class StageInfo:
    """Entry count, bytes and age range of one stage."""

    stage: str
    entries: int
    size: int
    oldest: float | None
    newest: float | None


@dataclass(frozen=True)
class PruneResult:
    """What ``prune`` removed (or would remove, on a dry run) and what it left."""

    removed: int
    freed: int
    kept: int
    skipped_locked: int
    leftovers: int


def _tree_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _folder_created(path: Path) -> float:
    try:
        return float(json.loads((path / MANIFEST).read_text())["created"])
    except (OSError, ValueError, KeyError, TypeError):
        return path.stat().st_mtime


def stages(root: Path) -> list[str]:
    """Stage folders under the cache root (hidden and stray files, and the download cache, ignored)."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != DOWNLOADS)


def entries(root: Path, stage: str) -> Iterator[Entry]:
    """Every complete entry of one stage (temporary build folders and lock files are not entries)."""
    stage_dir = root / stage
    for child in sorted(stage_dir.iterdir()):
        if child.is_dir() and _KEY.match(child.name) and (child / MANIFEST).exists():
            yield Entry(stage, child.name, child, _tree_size(child), _folder_created(child))
        elif child.is_dir() and _SHARD.match(child.name):
            for rec in sorted(child.glob("*.json")):
                if _KEY.match(rec.stem):
                    st = rec.stat()
                    yield Entry(stage, rec.stem, rec, st.st_size, st.st_mtime)


def info(root: Path) -> list[StageInfo]:
    """One row per stage, in name order."""
    rows = []
    for stage in stages(root):
        found = list(entries(root, stage))
        created = [e.created for e in found]
        rows.append(StageInfo(stage, len(found), sum(e.size for e in found),
                              min(created) if created else None, max(created) if created else None))
    return rows


def _remove(path: Path) -> None:
    """Moves ``path`` aside first, so no reader ever sees a half-deleted entry."""
    aside = path.with_name(f".prune-{path.name}-{os.getpid()}")
    os.replace(path, aside)
    if aside.is_dir():
        shutil.rmtree(aside, ignore_errors=True)
    else:
        aside.unlink(missing_ok=True)


def _leftovers(stage_dir: Path, cutoff: float, dry_run: bool) -> int:
    """Removes what killed jobs left behind: build folders nobody builds into, stale temp files, orphan locks."""
    count = 0
    for child in sorted(stage_dir.iterdir()):
        name = child.name
        if child.is_dir() and name.startswith("."):  # .<key[:12]>-xxx builds, .old-* and .prune-* folders
            if child.stat().st_mtime > cutoff:
                continue
            if not name.startswith((".old-", ".prune-")):
                prefix = name[1:].split("-", 1)[0]
                if any(_held(lock) for lock in stage_dir.glob(f"{prefix}*.lock")):
                    continue  # a job is building into it right now
            count += 1
            if not dry_run:
                shutil.rmtree(child, ignore_errors=True)
        elif child.is_file() and name.endswith(".lock" + HOLDER_SUFFIX) and _KEY.match(name.split(".", 1)[0]):
            lock_file = stage_dir / name[: -len(HOLDER_SUFFIX)]
            if child.stat().st_mtime > cutoff or (lock_file.exists() and _held(lock_file)):
                continue
            count += 1  # the holder note of a job killed while it held the lock
            if not dry_run:
                child.unlink(missing_ok=True)
        elif child.is_file() and name.endswith(".lock") and _KEY.match(name[:-5]):
            if (stage_dir / name[:-5]).exists() or child.stat().st_mtime > cutoff:
                continue
            lock = FileLock(str(child))
            try:
                lock.acquire(timeout=0)
            except Timeout:
                continue
            try:
                count += 1
                if not dry_run:
                    child.unlink(missing_ok=True)
            finally:
                lock.release()
    grace = min(cutoff, time.time() - TEMP_GRACE_S)
    for shard in (p for p in stage_dir.iterdir() if p.is_dir() and _SHARD.match(p.name)):
        for tmp in shard.glob(".*"):  # .tmp-* record writes and .prune-* leftovers
            if tmp.is_file() and tmp.stat().st_mtime <= grace:
                count += 1
                if not dry_run:
                    tmp.unlink(missing_ok=True)
    return count


def _held(lock_path: Path) -> bool:
    lock = FileLock(str(lock_path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False


def prune(root: Path, *, older_than_s: float, stage: str | None = None, dry_run: bool = False,
          now: float | None = None) -> PruneResult:
    """Removes entries created more than ``older_than_s`` seconds ago (one stage, or all of them)."""
    known = stages(root)
    if stage is not None and stage not in known:
        raise CacheError(f"--stage {stage!r} is not a stage of the cache at {root}; its stages are: "
                         f"{', '.join(known) or '(none: the cache is empty)'}")
    cutoff = (time.time() if now is None else now) - older_than_s
    removed = freed = kept = skipped = leftovers = 0
    for name in [stage] if stage else known:
        stage_dir = root / name
        for entry in entries(root, name):
            if entry.created > cutoff:
                kept += 1
                continue
            if entry.is_folder:  # under the builder's lock: a job that is loading it finishes first
                lock = FileLock(str(stage_dir / f"{entry.key}.lock"))
                try:
                    lock.acquire(timeout=0)
                except Timeout:
                    skipped += 1
                    continue
                try:
                    if not dry_run:
                        _remove(entry.path)
                finally:
                    lock.release()
            elif not dry_run:
                _remove(entry.path)
            removed += 1
            freed += entry.size
        leftovers += _leftovers(stage_dir, cutoff, dry_run)
        if not dry_run:
            for shard in stage_dir.iterdir():
                if shard.is_dir() and _SHARD.match(shard.name) and not any(shard.iterdir()):
                    shard.rmdir()
    return PruneResult(removed, freed, kept, skipped, leftovers)
