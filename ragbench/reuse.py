"""What a job computed that the next job of the same process would compute again, kept and reused.

A sweep's jobs run one after another in one process (Hydra's basic launcher; each worker of the joblib
launcher); the values are a cache of the process's session (``ragbench.session``). The jobs of a top-k
or retriever sweep read the same dataset files, chunk them the same way and map the same evidence onto
the same chunks: on the full LoCoMo file about 0.6 s per job, recomputed to the same value. Each kind
keeps its last value only (memory stays that of one job), and a value is reused only when it would be
recomputed exactly:

- ``dataset``: the adapter's configuration is equal, every file it read has the same SHA-256 and every
  folder holding one the same listing (an edited or added file is read again);
- ``chunks``: the chunker's parameters are equal and the documents are the very same object;
- ``evidence``: the chunk tree and the queries are the very same objects.

The log records a computation emitted (a dataset's "1 evidence entries hold no parseable dia_id") are
emitted again when its value is reused, so every job's log says what its own load would have said.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ragbench.session import CacheSlot

T = TypeVar("T")


@dataclass(frozen=True)
class _Entry:
    key: Hashable
    inputs: tuple[object, ...]  # compared by identity: the very objects the value was computed from
    value: Any
    signature: Hashable  # of the world outside the process (file stats), re-checked on every reuse
    records: tuple[logging.LogRecord, ...]


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class LastValues:
    """One last value per kind; see the module docstring for when a value is reused."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._order: list[str] = []  # kinds in the order a job first asks for them
        self._lock = threading.Lock()
        self.reused: dict[str, int] = {}  # kind -> how many times a value was reused (tests, benchmarks)

    def get(self, kind: str, key: Hashable, inputs: Sequence[object], compute: Callable[[], T], *,
            signature: Callable[[T], Hashable] = lambda _: None, logger: str = "ragbench") -> T:
        """``compute()``, or the last value of ``kind`` when ``key`` is equal, ``inputs`` are the same
        objects and ``signature(value)`` is unchanged."""
        with self._lock:
            entry = self._entries.get(kind)
        if (entry is not None and entry.key == key and len(entry.inputs) == len(inputs)
                and all(a is b for a, b in zip(entry.inputs, inputs, strict=True))
                and _safe(signature, entry.value) == entry.signature):
            for record in entry.records:  # again, as this job's own lines (its time, its log file)
                logging.getLogger(record.name).log(record.levelno, "%s", record.getMessage())
            with self._lock:
                self.reused[kind] = self.reused.get(kind, 0) + 1
            return entry.value
        # The old value goes before the new one is computed, and so do the kinds a job computes after this
        # one (chunks after the dataset, evidence after the chunks): they hold the old inputs. Memory
        # stays one job's worth.
        entry = None
        with self._lock:
            if kind not in self._order:
                self._order.append(kind)
            for later in self._order[self._order.index(kind):]:
                self._entries.pop(later, None)
        capture = _Capture()
        log = logging.getLogger(logger)
        log.addHandler(capture)
        try:
            value = compute()
        finally:
            log.removeHandler(capture)
        entry = _Entry(key=key, inputs=tuple(inputs), value=value, signature=_safe(signature, value),
                       records=tuple(capture.records))
        with self._lock:
            self._entries[kind] = entry
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.reused.clear()


def _safe(signature: Callable[[Any], Hashable], value: Any) -> Hashable:
    try:
        return signature(value)
    except OSError:
        return object()  # a file vanished: equal to nothing, so the value is computed again


def file_signature(root: str | Path, files: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """The SHA-256 of every file read and the listing of every folder holding one (a file added to a
    folder an adapter lists): what must be unchanged for a read to be reused. Hashing is a small share of
    reading (2.8 MB of LoCoMo: ~5 ms against ~150 ms to parse and check it), and, unlike a file's size
    and mtime, it cannot miss an edit made within the filesystem's timestamp granularity."""
    paths = [Path(root) / rel for rel in files]
    folders = sorted({p.parent for p in paths} | {Path(root)})
    return (tuple(f"{rel}={hashlib.sha256(p.read_bytes()).hexdigest()}" for rel, p in zip(files, paths, strict=True)),
            *(tuple([str(d), *sorted(os.listdir(d))]) for d in folders if d.is_dir()))


LAST: Any = CacheSlot(__name__, LastValues)  # the current session's last values (ragbench.session)
