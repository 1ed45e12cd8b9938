"""``python -m ragbench.cache info|prune|docs|forget|reset``: size per stage of the stage cache, removal by age,
the indexed documents (per-document index pieces), one document's removal, and clearing it all."""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ragbench.cache.doc_inventory import DocPiece, doc_pieces, forget, reset
from ragbench.cache.inventory import StageInfo, info, prune
from ragbench.cache.root import DEFAULT_DIR, ENV_VAR, job_cache_dir
from ragbench.errors import CacheError, ConfigError, coded

__all__ = ["default_dir", "info", "main", "parse_age", "parser", "prune"]

log = logging.getLogger("ragbench.cache")

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def default_dir() -> Path:
    """``$RAGBENCH_CACHE``, else ``.ragbench_cache`` in the current folder (as config.yaml)."""
    return job_cache_dir()


def parse_age(text: str) -> float:
    """Seconds in ``7d``, ``12h``, ``30m``, ``90s``, ``2w`` or a plain number of seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if m is None:
        raise ConfigError(f"--older-than {text!r} is not an age; write a number with one of the units "
                          f"{', '.join(UNITS)} (e.g. 7d, 12h, 30m) or plain seconds")
    return float(m.group(1)) * UNITS[m.group(2) or "s"]


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
                                description="Size per stage of ragbench's stage cache; removal of old entries; indexed documents.")
    p.add_argument("--dir", type=Path, default=None,
                   help=f"cache root (default: ${ENV_VAR}, else ./{DEFAULT_DIR}, as cache.dir in config.yaml)")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="entries, size and age per stage")
    pr = sub.add_parser("prune", help="remove entries created longer ago than --older-than")
    pr.add_argument("--older-than", required=True, metavar="AGE", help="e.g. 7d, 12h, 30m, 90s (0 = everything)")
    pr.add_argument("--stage", default=None, help="only this stage (e.g. index, retrieval, answers, verdicts)")
    pr.add_argument("--dry-run", action="store_true", help="list what would go, remove nothing")
    dc = sub.add_parser("docs", help="the indexed documents: dataset, id, chunk count, sha256, embedder")
    dc.add_argument("--dataset", default=None, metavar="NAME", help="only this dataset's documents")
    fg = sub.add_parser("forget", help="drop one document's entries (its index piece and the indexes built with it)")
    fg.add_argument("doc", metavar="DOC", help="a document id, or 8+ hex digits of its sha256 (as `docs` lists)")
    fg.add_argument("--dataset", default=None, metavar="NAME", help="only this dataset's document")
    rs = sub.add_parser("reset", help="remove every entry of the cache (asks first)")
    rs.add_argument("--yes", action="store_true", help="do not ask (scripts)")
    return p


def _print_docs(root: Path, rows: Sequence[DocPiece]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    if not rows:
        console.print(f"stage cache {root}: no indexed documents yet (a job with a dense retriever indexes them)")
        return
    table = Table(title=f"indexed documents in {root.resolve()}", title_justify="left")
    for col, justify in (("dataset", "left"), ("document", "left"), ("chunks", "right"), ("sha256", "left"),
                         ("embedder", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        table.add_row(r.dataset, r.doc_id, str(r.chunks), r.sha256[:16], r.embedder)
    console.print(table)


def _reset(root: Path, yes: bool) -> int:
    if not root.is_dir():
        log.info("no stage cache at %s: nothing to reset (pass --dir or set %s)", root, ENV_VAR)
        return 0
    rows = info(root)
    what = f"{sum(r.entries for r in rows)} entries, {human_size(sum(r.size for r in rows))}"
    if not yes:
        if not sys.stdin.isatty():
            log.error("error: cache reset would remove every entry of %s (%s) and stdin is not a terminal to "
                      "ask; pass --yes to confirm", root, what)
            return 2
        reply = input(f"remove every entry of the stage cache {root} ({what})? [y/N] ")
        if reply.strip().lower() not in ("y", "yes"):
            log.info("kept the cache: nothing removed")
            return 1
    res = reset(root)
    log.info("removed %d entries (%s) from %s", res.removed, human_size(res.freed), root)
    if res.skipped_locked:
        log.info("skipped %d entries locked by a running job; reset again when it has finished", res.skipped_locked)
    return 0


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
        if args.command == "docs":
            _print_docs(root, doc_pieces(root, args.dataset))
            return 0
        if args.command == "forget":
            gone = forget(root, args.doc, dataset=args.dataset)
            log.info("forgot %s: removed %d document pieces and %d index entries built with it from %s%s", args.doc,
                     gone.pieces, gone.indexes, root, f"; skipped {gone.skipped_locked} entries locked by a running "
                     "job (forget again when it has finished)" if gone.skipped_locked else "")
            return 0
        if args.command == "reset":
            return _reset(root, args.yes)
        age = parse_age(args.older_than)
        if not root.is_dir():
            log.info("no stage cache at %s: nothing to prune (pass --dir or set %s)", root, ENV_VAR)
            return 0
        res = prune(root, older_than_s=age, stage=args.stage, dry_run=args.dry_run)
    except (CacheError, ConfigError) as exc:
        log.error("error: %s", coded(exc))
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
