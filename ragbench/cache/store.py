"""Content-addressed stage cache: entries built in a temp folder, renamed into place under a file lock,
each with a manifest of what went into its key. Readers never see a half-written entry."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock

from ragbench.errors import CacheError, ConfigError

log = logging.getLogger(__name__)
T = TypeVar("T")
MANIFEST = "manifest.json"
SCHEMA = 1


class CacheMode(str, Enum):
    """read_write: use and fill; refresh: rebuild and overwrite; read_only: use, never write; off."""

    READ_WRITE = "read_write"
    REFRESH = "refresh"
    READ_ONLY = "read_only"
    OFF = "off"

    @classmethod
    def parse(cls, value: str) -> CacheMode:
        try:
            return cls(value)
        except ValueError:
            valid = ", ".join(m.value for m in cls)
            raise ConfigError(f"cache.mode={value!r} is not valid; choose one of: {valid}") from None


def make_key(parts: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``parts`` (which carry the upstream keys: a chain)."""
    blob = json.dumps({"schema": SCHEMA, **parts}, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


class StageCache:
    """One store for every stage: ``<dir>/<stage>/<key>/`` folders (big entries) or
    ``<dir>/<stage>/<key[:2]>/<key>.json`` files (per-case entries)."""

    def __init__(self, *, dir: str = ".ragbench_cache", mode: str = "read_write") -> None:
        self.dir = Path(dir).expanduser()
        self.mode = CacheMode.parse(mode)
        self.hits: Counter[str] = Counter()
        self.misses: Counter[str] = Counter()
        self.keys: dict[str, str] = {}

    @property
    def reads(self) -> bool:
        return self.mode in (CacheMode.READ_WRITE, CacheMode.READ_ONLY)

    @property
    def writes(self) -> bool:
        return self.mode in (CacheMode.READ_WRITE, CacheMode.REFRESH)

    def _stage_dir(self, stage: str) -> Path:
        d = self.dir / stage
        if self.writes:
            d.mkdir(parents=True, exist_ok=True)
        return d

    def folder(
        self,
        stage: str,
        key: str,
        manifest: Mapping[str, Any],
        build: Callable[[], T],
        save: Callable[[T, Path], None],
        load: Callable[[Path, Mapping[str, Any]], T],
    ) -> tuple[T, bool]:
        """The entry's value and whether it came from the cache. Under the key's lock, so two jobs that
        need the same entry build it once: the second waits and then loads."""
        self.keys[stage] = key
        if self.mode is CacheMode.OFF:
            self.misses[stage] += 1
            return build(), False
        target = self.dir / stage / key
        if not self.writes:
            if self.reads and (target / MANIFEST).exists():
                self.hits[stage] += 1
                return load(target, self._manifest(target)), True
            self.misses[stage] += 1
            return build(), False
        stage_dir = self._stage_dir(stage)
        with FileLock(str(stage_dir / f"{key}.lock")):
            if self.reads and (target / MANIFEST).exists():
                self.hits[stage] += 1
                return load(target, self._manifest(target)), True
            self.misses[stage] += 1
            value = build()
            tmp = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=stage_dir))
            try:
                save(value, tmp)
                full = {**manifest, "key": key, "stage": stage, "created": time.time()}
                (tmp / MANIFEST).write_text(json.dumps(full, indent=2, sort_keys=True, default=str))
                if target.exists():  # refresh: move the old entry away first
                    old = stage_dir / f".old-{key[:12]}-{os.getpid()}"
                    os.replace(target, old)
                    shutil.rmtree(old, ignore_errors=True)
                os.replace(tmp, target)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
            return value, False

    @staticmethod
    def _manifest(target: Path) -> dict[str, Any]:
        try:
            return json.loads((target / MANIFEST).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CacheError(
                f"cache entry {target} has an unreadable manifest ({exc}); delete the folder or rerun with "
                "cache.mode=refresh"
            ) from exc

    def _record_path(self, stage: str, key: str) -> Path:
        return self.dir / stage / key[:2] / f"{key}.json"

    def get_record(self, stage: str, key: str) -> dict[str, Any] | None:
        """A small per-case entry (an answer, a verdict), or None on a miss."""
        if not self.reads:
            self.misses[stage] += 1
            return None
        path = self._record_path(stage, key)
        try:
            record = json.loads(path.read_text())
        except FileNotFoundError:
            self.misses[stage] += 1
            return None
        except (OSError, json.JSONDecodeError):
            log.warning("ignoring unreadable cache record %s", path)
            self.misses[stage] += 1
            return None
        self.hits[stage] += 1
        return record["value"]

    def put_record(self, stage: str, key: str, manifest: Mapping[str, Any], value: Any) -> None:
        """Writes a small entry atomically (temp file + rename: last writer wins with equal content)."""
        if not self.writes:
            return
        path = self._record_path(stage, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        with os.fdopen(fd, "w") as fh:
            json.dump({"manifest": dict(manifest), "value": value, "created": time.time()}, fh, default=str)
        os.replace(tmp, path)

    def counters(self) -> dict[str, float]:
        """``cache/<stage>/hits|misses`` for MLflow."""
        out: dict[str, float] = {}
        for stage in sorted(set(self.hits) | set(self.misses)):
            out[f"cache/{stage}/hits"] = float(self.hits[stage])
            out[f"cache/{stage}/misses"] = float(self.misses[stage])
        return out
