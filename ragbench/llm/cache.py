"""On-disk response cache keyed by (model, api_base, messages/input, params): a rerun makes no calls.

One JSON file per response under ``<dir>/<key[:2]>/<key>.json``, written to a temporary file and
``os.replace``d into place, so concurrent threads or jobs never read a half-written entry. Each entry
carries the SHA-256 of its content, checked on load. It follows the stage cache's :class:`CacheMode`:
read_only reads and never writes (nor creates a folder), refresh writes and never reads. The API key is
never part of the key or the stored value.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragbench.cache.files import json_sha256, write_json_atomic
from ragbench.cache.mode import CacheMode
from ragbench.errors import CacheCorruptError

log = logging.getLogger(__name__)

CACHE_SCHEMA = 1
HASH_FIELD = "sha256"


def default_cache_dir() -> Path:
    """``$RAGBENCH_CACHE/llm``, else the user cache dir (``platformdirs``) + ``ragbench/llm``."""
    root = os.environ.get("RAGBENCH_CACHE")
    if not root:
        import platformdirs

        root = platformdirs.user_cache_dir("ragbench")
    return Path(root) / "llm"


def cache_key(kind: str, request: Mapping[str, Any]) -> str:
    """SHA-256 over the canonical JSON of the request (what makes the answer what it is)."""
    return json_sha256({"schema": CACHE_SCHEMA, "kind": kind, "request": request})


class ResponseCache:
    """A directory of cached responses; ``get`` returns None on a miss. A corrupt entry (unreadable,
    not an object, failing its hash) is a miss with a warning, or a CacheCorruptError in read_only."""

    def __init__(self, root: str | Path, mode: CacheMode | str | bool = CacheMode.READ_WRITE) -> None:
        self.root = Path(root)
        self.mode = CacheMode.parse(mode, key="llm.use_cache")
        self._write_failed = False

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        if not self.mode.reads:
            return None
        path = self.path(key)
        try:
            with path.open(encoding="utf-8") as fh:
                value = json.load(fh)
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            self._corrupt(path, f"it is unreadable ({exc})")
            return None
        if not isinstance(value, dict):
            self._corrupt(path, f"it is a JSON {type(value).__name__}, not an object")
            return None
        sha = value.pop(HASH_FIELD, None)  # absent in entries of older versions: the caller checks the shape
        if sha is not None and sha != json_sha256(value):
            self._corrupt(path, "its content does not match its content hash")
            return None
        return value

    def _corrupt(self, path: Path, reason: str) -> None:
        message = f"llm cache entry {path} is corrupt: {reason}"
        if not self.mode.writes:
            raise CacheCorruptError(f"{message}\n  fix: rerun with cache.mode=read_write to replace it (one new "
                                    "call), or delete it")
        log.warning("%s; calling the model again", message)
        return None

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Stores a reply (read_write, refresh). A failed write is logged once, never fatal: the reply
        in hand was paid for and is right, it is just not cached."""
        if not self.mode.writes:
            return
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(path, {**value, HASH_FIELD: json_sha256(dict(value))})
        except OSError as exc:
            if not self._write_failed:
                self._write_failed = True
                log.warning("cannot write llm cache entry %s (%s); replies are not cached. fix: make "
                            "llm.cache_dir writable, or use cache.mode=read_only", path, exc)
