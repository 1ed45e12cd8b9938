"""``python -m ragbench.cache info|prune``: size per stage of the stage cache and removal by age."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from ragbench.cache.store import MANIFEST
from ragbench.errors import CacheError, ConfigError

log = logging.getLogger("ragbench.cache")

ENV_VAR = "RAGBENCH_STAGE_CACHE"
DEFAULT_DIR = ".ragbench_cache"  # the same default as config.yaml's cache.dir
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
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


def default_dir() -> Path:
    """``$RAGBENCH_STAGE_CACHE``, else ``.ragbench_cache`` in the current folder (as config.yaml)."""
    return Path(os.environ.get(ENV_VAR) or DEFAULT_DIR).expanduser()


def parse_age(text: str) -> float:
    """Seconds in ``7d``, ``12h``, ``30m``, ``90s``, ``2w`` or a plain number of seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if m is None:
        raise ConfigError(f"--older-than {text!r} is not an age; write a number with one of the units "
                          f"{', '.join(UNITS)} (e.g. 7d, 12h, 30m) or plain seconds")
    return float(m.group(1)) * UNITS[m.group(2) or "s"]


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
    """Stage folders under the cache root (hidden and stray files ignored)."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


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


def human_size(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def human_age(seconds: float) -> str:
    """Seconds -> '3d 4h', '5h 2m', '42s'."""
    s = max(int(seconds), 0)
    d, h, m = s // 86400, s % 86400 // 3600, s % 3600 // 60
    if d:
        return f"{d}d {h}h"
    if h:
        return f"{h}h {m}m"
    return f"{m}m {s % 60}s" if m else f"{s}s"


def _print_info(root: Path, rows: Sequence[StageInfo]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
    if not rows:
        state = "empty" if root.is_dir() else "does not exist"
        console.print(f"stage cache {root}: {state}, nothing cached yet (another cache? pass --dir or set {ENV_VAR})")
        return
    now = time.time()
    table = Table(title=f"stage cache {root.resolve()}", title_justify="left")
    for col, justify in (("stage", "left"), ("entries", "right"), ("size", "right"), ("oldest", "right"),
                         ("newest", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        table.add_row(r.stage, str(r.entries), human_size(r.size),
                      human_age(now - r.oldest) if r.oldest else "-", human_age(now - r.newest) if r.newest else "-")
    table.add_row("total", str(sum(r.entries for r in rows)), human_size(sum(r.size for r in rows)), "", "",
                  style="bold")
    console.print(table)


def parser() -> argparse.ArgumentParser:
    """The command line of ``python -m ragbench.cache``."""
    p = argparse.ArgumentParser(prog="python -m ragbench.cache",
                                description="Size per stage of ragbench's stage cache; removal of old entries.")
    p.add_argument("--dir", type=Path, default=None,
                   help=f"cache root (default: ${ENV_VAR}, else ./{DEFAULT_DIR}, as cache.dir in config.yaml)")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="entries, size and age per stage")
    pr = sub.add_parser("prune", help="remove entries created longer ago than --older-than")
    pr.add_argument("--older-than", required=True, metavar="AGE", help="e.g. 7d, 12h, 30m, 90s (0 = everything)")
    pr.add_argument("--stage", default=None, help="only this stage (e.g. index, retrieval, answers, verdicts)")
    pr.add_argument("--dry-run", action="store_true", help="list what would go, remove nothing")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the CLI; returns the exit status (2 on a usage or cache error)."""
    logging.basicConfig(format="%(message)s", stream=sys.stderr)
    log.setLevel(logging.INFO)  # the CLI's messages are its output
    args = parser().parse_args(argv)
    root: Path = args.dir if args.dir is not None else default_dir()
    try:
        if args.command == "info":
            _print_info(root, info(root))
            return 0
        age = parse_age(args.older_than)
        if not root.is_dir():
            log.info("no stage cache at %s: nothing to prune (pass --dir or set %s)", root, ENV_VAR)
            return 0
        res = prune(root, older_than_s=age, stage=args.stage, dry_run=args.dry_run)
    except (CacheError, ConfigError) as exc:
        log.error("error: %s", exc)
        return 2
    verb = "would remove" if args.dry_run else "removed"
    where = f"stage {args.stage!r}" if args.stage else "all stages"
    log.info("%s %d entries (%s) older than %s from %s of %s; kept %d newer entries",
             verb, res.removed, human_size(res.freed), args.older_than, where, root, res.kept)
    if res.skipped_locked:
        log.info("skipped %d entries locked by a running job; prune again when it has finished", res.skipped_locked)
    if res.leftovers:
        log.info("%s %d leftovers (unfinished build folders and temp files of killed jobs, lock files of "
                 "removed entries)", verb, res.leftovers)
    return 0
