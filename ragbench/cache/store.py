"""Content-addressed stage cache: entries built in a temp folder, renamed into place under a file lock,
each with a manifest of what went into its key and the SHA-256 of its files, checked on every load.
Readers never see a half-written entry; a corrupt entry is rebuilt (read_write) or refused (read_only)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ragbench.cache.files import MANIFEST, json_sha256, payload_hashes, payload_problem, write_json_atomic
from ragbench.cache.lock import DEFAULT_TIMEOUT_S, check_timeout, hold
from ragbench.cache.mode import CacheMode
from ragbench.errors import CacheCorruptError, CacheError, RagbenchError
from ragbench.metric_info import MetricInfo
from ragbench.redact import mask_secrets

__all__ = ["MANIFEST", "SCHEMA", "CacheMode", "StageCache", "make_key"]

log = logging.getLogger(__name__)
T = TypeVar("T")
SCHEMA = 1
_STAGE = "a cache stage's entries (index, retrieval, query_vectors, answers, verdicts, llm) "
# StageCache.counters' keys
METRICS = {
    "cache/<name>/hits": MetricInfo(_STAGE + "the job read from the cache", "ragbench", kind="diagnostic",
                                    job_level="a count", unit="count"),
    "cache/<name>/misses": MetricInfo(_STAGE + "the job computed (and wrote, unless cache.mode=read_only)",
                                      "ragbench", kind="diagnostic", job_level="a count", unit="count"),
    "cache/<name>/corrupt": MetricInfo(_STAGE + "that failed their check (recomputed)", "ragbench",
                                       higher_is_better=False, kind="diagnostic", job_level="a count",
                                       unit="count"),
}
# what a loader raises on a damaged file (np.load: ValueError/EOFError; json: ValueError; shapes: the rest)
LOAD_ERRORS = (OSError, ValueError, EOFError, KeyError, TypeError, IndexError, AttributeError)


def make_key(parts: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``parts`` (which carry the upstream keys: a chain)."""
    return json_sha256({"schema": SCHEMA, **parts}, ascii=True)


def masked(value: Any) -> Any:
    """``value`` with every registered secret masked in its strings (``ragbench.redact.mask_secrets``): a
    per-case entry (an answer, a verdict, a reply) never holds a key, whichever path made it. The replies
    and records that reach it are masked where they come in; this is the cache's own last check."""
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, Mapping):
        return {k: masked(v) for k, v in value.items()}
    if isinstance(value, list | tuple) and not all(type(v) in _NUMBERS for v in value):
        return [masked(v) for v in value]
    return value


_NUMBERS = (int, float, bool)


class _Corrupt(Exception):
    """An entry failed its check; the reason names what is wrong."""


class _Unhashed(Exception):
    """An entry written before entries carried content hashes: sound, probably, but not verifiable."""


def _identity(value: Any) -> Any:
    return value


class StageCache:
    """One store for every stage: ``<dir>/<stage>/<key>/`` folders (big entries) or
    ``<dir>/<stage>/<key[:2]>/<key>.json`` files (per-case entries)."""

    def __init__(self, *, dir: str = ".ragbench_cache", mode: str = "read_write",
                 lock_timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.dir = Path(dir).expanduser()
        self.mode = CacheMode.parse(mode)
        self.lock_timeout_s = check_timeout(lock_timeout_s)
        self.hits: Counter[str] = Counter()
        self.misses: Counter[str] = Counter()
        self.corrupt: Counter[str] = Counter()
        self.keys: dict[str, str] = {}
        self._write_failed: set[str] = set()

    @property
    def reads(self) -> bool:
        return self.mode.reads

    @property
    def writes(self) -> bool:
        return self.mode.writes

    def _stage_dir(self, stage: str) -> Path:
        d = self.dir / stage
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(f"cannot write the stage cache at {d}: {exc}\n  fix: make cache.dir writable, point "
                             "cache.dir elsewhere, or use cache.mode=read_only (use it, never write)") from exc
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
        need the same entry build it once: the second waits (at most ``lock_timeout_s``) and then loads."""
        self.keys[stage] = key
        if self.mode is CacheMode.OFF:
            self.misses[stage] += 1
            return build(), False
        target = self.dir / stage / key
        if not self.writes:  # read_only: no lock, no write
            if target.exists():
                try:
                    value = self._checked(stage, target, load)
                except _Unhashed:
                    raise self._corrupt_error(stage, target, "it was written by an older ragbench, without a "
                                              "content hash, so it cannot be verified") from None
                self.hits[stage] += 1
                return value, True
            self.misses[stage] += 1
            return build(), False
        stage_dir = self._stage_dir(stage)
        with hold(stage_dir / f"{key}.lock", timeout_s=self.lock_timeout_s, what=f"building or loading {stage} entry {key}"):
            if self.reads and target.exists():
                try:
                    value = self._checked(stage, target, load)
                except CacheCorruptError as exc:
                    log.warning("%s; rebuilding it", str(exc).split("\n")[0])
                except _Unhashed:
                    log.info("cache entry %s predates content hashes; rebuilding it once", target)
                else:
                    self.hits[stage] += 1
                    return value, True
            self.misses[stage] += 1
            value = build()
            self._store(stage, key, stage_dir, target, manifest, value, save)
            return value, False

    def _store(self, stage: str, key: str, stage_dir: Path, target: Path, manifest: Mapping[str, Any],
               value: T, save: Callable[[T, Path], None]) -> None:
        tmp = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=stage_dir))
        try:
            save(value, tmp)
            full = {**manifest, "key": key, "stage": stage, "created": time.time(),
                    "content_sha256": payload_hashes(tmp)}
            (tmp / MANIFEST).write_text(json.dumps(full, indent=2, sort_keys=True, default=str))
            if target.exists() or target.is_symlink():  # refresh, or a corrupt entry: move it away first
                old = stage_dir / f".old-{key[:12]}-{os.getpid()}"
                os.replace(target, old)
                if old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    old.unlink(missing_ok=True)
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    def _checked(self, stage: str, target: Path, load: Callable[[Path, Mapping[str, Any]], T]) -> T:
        """The entry's value after its content check; CacheCorruptError names what is wrong and the fix."""
        try:
            manifest = json.loads((target / MANIFEST).read_text(encoding="utf-8"))
            if not isinstance(manifest, dict):
                raise _Corrupt(f"its manifest is a JSON {type(manifest).__name__}, not an object")
            if "content_sha256" not in manifest:
                raise _Unhashed
            problem = payload_problem(target, manifest["content_sha256"])
            if problem:
                raise _Corrupt(problem)
            return load(target, manifest)
        except RagbenchError:
            raise  # a stored entry built with other settings says so itself (IndexMismatchError)
        except _Corrupt as exc:
            reason = str(exc)
        except LOAD_ERRORS as exc:
            reason = f"it cannot be read ({type(exc).__name__}: {exc})"
        raise self._corrupt_error(stage, target, reason)

    def _corrupt_error(self, stage: str, path: Path, reason: str) -> CacheCorruptError:
        self.corrupt[stage] += 1
        return CacheCorruptError(f"cache entry {path} is corrupt: {reason}\n  fix: rerun with cache.mode=read_write "
                                 f"to rebuild it, or delete it (python -m ragbench.cache prune)")

    def _record_path(self, stage: str, key: str) -> Path:
        return self.dir / stage / key[:2] / f"{key}.json"

    def get_record(self, stage: str, key: str, parse: Callable[[Any], T] = _identity) -> T | None:
        """A small per-case entry (an answer, a verdict) as ``parse`` makes it, or None on a miss. An entry
        that fails its hash or ``parse`` (wrong shape) is a miss in read_write (the caller recomputes and
        overwrites it) and a CacheCorruptError in read_only."""
        if not self.reads:
            self.misses[stage] += 1
            return None
        path = self._record_path(stage, key)
        try:
            record = json.loads(path.read_bytes())
            if not isinstance(record, dict) or "value" not in record:
                raise _Corrupt("it is not a {'value': ...} record")
            sha = record.get("sha256")  # absent in records of older versions: their shape is still checked
            if sha is not None and sha != json_sha256(record["value"]):
                raise _Corrupt("its value does not match its content hash")
            value = parse(record["value"])
        except FileNotFoundError:
            self.misses[stage] += 1
            return None
        except _Corrupt as exc:
            reason = str(exc)
        except LOAD_ERRORS as exc:
            reason = f"it cannot be read ({type(exc).__name__}: {exc})"
        else:
            self.hits[stage] += 1
            return value
        error = self._corrupt_error(stage, path, reason)
        if not self.writes:
            raise error
        log.warning("%s; recomputing it", str(error).split("\n")[0])
        self.misses[stage] += 1
        return None

    def put_record(self, stage: str, key: str, manifest: Mapping[str, Any], value: Any) -> None:
        """Writes a small entry atomically (temp file + rename: last writer wins with equal content). A
        failed write is logged, never fatal: the value in hand is right, it is just not cached."""
        if not self.writes:
            return
        path = self._record_path(stage, key)
        value, manifest = masked(value), masked(dict(manifest))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(path, {"manifest": dict(manifest), "value": value, "sha256": json_sha256(value),
                                     "created": time.time()})
        except OSError as exc:
            if stage not in self._write_failed:
                self._write_failed.add(stage)
                log.warning("cannot write %s cache entry %s (%s); results are not cached. fix: make cache.dir "
                            "writable or use cache.mode=read_only", stage, path, exc)

    def counters(self) -> dict[str, float]:
        """``cache/<stage>/hits|misses`` for MLflow, and ``cache/<stage>/corrupt`` when an entry failed its check."""
        out: dict[str, float] = {}
        for stage in sorted(set(self.hits) | set(self.misses)):
            out[f"cache/{stage}/hits"] = float(self.hits[stage])
            out[f"cache/{stage}/misses"] = float(self.misses[stage])
        for stage in sorted(self.corrupt):
            out[f"cache/{stage}/corrupt"] = float(self.corrupt[stage])
        return out
