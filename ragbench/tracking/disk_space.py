"""How much room a disk has, and whether an error says it has none: what ``full_disk`` (a write that stops
the sweep) and ``store`` (a new store that does not fit) name in their one line."""

from __future__ import annotations

import errno
import re
import shutil
from pathlib import Path

# sqlite's SQLITE_FULL, the system's ENOSPC text, numpy's short write (np.save raises it without an errno)
FULL_TEXT = re.compile(r"database or disk is full|No space left on device|\d+ requested and \d+ written")


def full_disk(exc: BaseException) -> BaseException | None:
    """The error in ``exc``'s chain that says a disk is full (ENOSPC, EDQUOT, sqlite "database or disk is
    full", a short write), else None."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno in (errno.ENOSPC, errno.EDQUOT):
            return cur
        if FULL_TEXT.search(str(cur)):
            return cur
        cur = cur.__cause__ or cur.__context__
    return None


def free_bytes(path: Path) -> int | None:
    """Free bytes on the disk holding ``path`` (its nearest existing folder), None if unknown."""
    for folder in (path, *path.parents):
        if folder.exists():
            try:
                return shutil.disk_usage(folder).free
            except OSError:
                return None
    return None


def size_text(n: int | None) -> str:
    """``78.2 GB``, ``512 bytes``, ``unknown``."""
    if n is None:
        return "unknown"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
