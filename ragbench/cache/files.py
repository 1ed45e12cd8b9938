"""The cache layer's file primitives: one atomic JSON writer and the content hashes checked on load."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
CHUNK = 1 << 20


def write_json_atomic(path: Path, value: Any, *, indent: int | None = None, sort_keys: bool = True,
                      newline: bool = False) -> None:
    """Writes ``value`` as JSON to a temp file beside ``path``, then renames it into place: a reader
    sees the old file or the new one, never half of one. ``sort_keys=False`` keeps the mapping's order
    (a file people read); ``newline`` ends it with one. Raises OSError (the caller names the fix)."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(value, fh, ensure_ascii=False, sort_keys=sort_keys, default=str, indent=indent)
            if newline:
                fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def json_sha256(value: Any, *, ascii: bool = False) -> str:
    """SHA-256 of the canonical JSON of ``value``: the one key and content-hash function of every cache
    (equal before writing and after reading back). ``ascii`` escapes non-ASCII text, as the stage cache's
    keys always have (kept so that no stored entry changes its key)."""
    blob = json.dumps(value, sort_keys=True, ensure_ascii=ascii, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def payload_hashes(folder: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file of an entry folder except its manifest."""
    return {p.relative_to(folder).as_posix(): file_sha256(p)
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}


def payload_problem(folder: Path, expected: Any) -> str | None:
    """What is wrong with an entry folder's payload against its manifest's hashes, or None."""
    if not isinstance(expected, Mapping) or not expected:
        return "its manifest's content hash is not a mapping of files to hashes"
    for name, want in sorted(expected.items()):
        path = folder / str(name)
        if not path.is_file():
            return f"its file {name} is missing"
        if file_sha256(path) != want:
            return f"its file {name} does not match the content hash in its manifest"
    return None
