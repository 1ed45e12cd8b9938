"""On-disk response cache keyed by (model, api_base, messages/input, params): a rerun makes no calls.

One JSON file per response under ``<dir>/<key[:2]>/<key>.json``, written to a temporary file and
``os.replace``d into place, so concurrent threads or jobs never read a half-written entry. The API
key is never part of the key or the stored value.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragbench.errors import CacheError

log = logging.getLogger(__name__)

CACHE_SCHEMA = 1


def default_cache_dir() -> Path:
    """``$RAGBENCH_CACHE/llm``, else the user cache dir (``platformdirs``) + ``ragbench/llm``."""
    root = os.environ.get("RAGBENCH_CACHE")
    if not root:
        import platformdirs

        root = platformdirs.user_cache_dir("ragbench")
    return Path(root) / "llm"


def cache_key(kind: str, request: Mapping[str, Any]) -> str:
    """SHA-256 over the canonical JSON of the request (what makes the answer what it is)."""
    payload = json.dumps(
        {"schema": CACHE_SCHEMA, "kind": kind, "request": request},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ResponseCache:
    """A directory of cached responses; ``get`` returns None on a miss or an unreadable entry."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self.path(key)
        try:
            with path.open(encoding="utf-8") as fh:
                value = json.load(fh)
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            log.warning("llm cache entry %s is unreadable (%s); calling the model again", path, exc)
            return None
        return value if isinstance(value, dict) else None

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        path = self.path(key)
        tmp: str | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(value, fh, ensure_ascii=False, sort_keys=True)
            os.replace(tmp, path)
            tmp = None
        except OSError as exc:
            raise CacheError(
                f"cannot write llm cache entry {path}: {exc}\n  fix: make llm.cache_dir writable "
                f"or set llm.use_cache=false"
            ) from exc
        finally:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
