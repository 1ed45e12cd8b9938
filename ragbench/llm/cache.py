"""LLM replies as records of the one cache store (``<cache.dir>/llm/<key[:2]>/<key>.json``): the same
key function (``ragbench.cache.keys.reply_key`` = ``make_key``), the same atomic writer, content hash,
corruption handling and ``cache.mode`` as the stage cache's answers and verdicts. A rerun makes no call.
The API key is never part of the key or the stored value."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from ragbench.cache.keys import reply_key
from ragbench.cache.store import StageCache

log = logging.getLogger(__name__)
STAGE = "llm"


class ReplyCache:
    """One client's view of the store: ``get`` is None on a miss (or a stored reply ``usable`` refuses);
    a corrupt record is a miss with a warning, or a CacheCorruptError under read_only (the store's rule)."""

    def __init__(self, store: StageCache, where: str) -> None:
        self.store = store
        self.where = where
        self._hit_logged = False

    def get(self, kind: str, request: Mapping[str, Any], usable: Callable[[dict[str, Any]], bool]
            ) -> dict[str, Any] | None:
        key = reply_key(kind, request)
        hit = self.store.get_record(STAGE, key, parse=_mapping)
        if hit is None or not usable(hit):
            return None
        level = logging.DEBUG if self._hit_logged else logging.INFO
        self._hit_logged = True
        log.log(level, "%s: served from cache %s (key %s)", self.where, self.store.dir, key[:12])
        return hit

    def put(self, kind: str, request: Mapping[str, Any], value: Mapping[str, Any]) -> None:
        """Stores a reply (read_write, refresh); a failed write is logged once by the store, never fatal."""
        manifest = {"kind": kind, "model": request.get("model"), "api_base": request.get("api_base")}
        self.store.put_record(STAGE, reply_key(kind, request), manifest, dict(value))


def _mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"a reply record holds a JSON object, not a {type(value).__name__}")
    return value
