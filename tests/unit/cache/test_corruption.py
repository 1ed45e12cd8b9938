"""Corrupt cache entries, one table: read_write rebuilds (a warning names the entry), read_only refuses with
CacheCorruptError and writes nothing. Never a raw traceback, never a silently wrong value."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragbench.cache.entries import (
    answer_from,
    answer_record,
    load_hits,
    load_vectors,
    save_hits,
    save_vectors,
    verdict_from,
)
from ragbench.cache.files import json_sha256
from ragbench.cache.keys import reply_key
from ragbench.cache.store import StageCache
from ragbench.errors import CacheCorruptError
from ragbench.llm.cache import ReplyCache
from ragbench.types import Answer, Hit, Usage

KEY = "ab" * 32
IDS = [f"c{i}" for i in range(5)]
VECTORS = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
HITS = [[Hit("c1", 0.9, 1), Hit("c2", 0.5, 2)], [Hit("c3", 0.7, 1)]]
ANSWER = Answer(text="Paris [1]", model="m", latency_s=0.25, usage=Usage(3, 2, 0.001, cached=True), citations=(1,))
VERDICT = {"judge/score": 4.0, "judge/judge_failed": 0.0}
REPLY = {"text": "Paris", "model": "m", "prompt_tokens": 3, "completion_tokens": 1, "cost_usd": 0.0}
REQUEST = {"model": "m", "api_base": None, "messages": [{"role": "user", "content": "capital?"}], "params": {}}
REPLY_KEY = reply_key("chat", REQUEST)  # an LLM reply is a record of the one store, under the one key function


@dataclass(frozen=True)
class Entry:
    """One kind of cache entry: how to create it, where it lives, and one read through its cache."""

    name: str
    create: Callable[[Path], None]
    path: Callable[[Path], Path]
    read: Callable[[Path, str], tuple[Any, bool]]  # (value, served from the cache)
    expected: Any


def _vectors_read(root: Path, mode: str) -> tuple[Any, bool]:
    value, hit = StageCache(dir=str(root), mode=mode).folder(
        "index", KEY, {"what": "vectors"}, build=lambda: (IDS, VECTORS), save=save_vectors,
        load=lambda f, m: load_vectors(f))
    return (value[0], value[1].tolist()), hit


def _hits_read(root: Path, mode: str) -> tuple[Any, bool]:
    return StageCache(dir=str(root), mode=mode).folder(
        "retrieval", KEY, {"what": "hits"}, build=lambda: HITS, save=save_hits, load=lambda f, m: load_hits(f))


def _record_read(stage: str, value: Any, parse: Callable[[Any], Any]) -> Callable[[Path, str], tuple[Any, bool]]:
    def read(root: Path, mode: str) -> tuple[Any, bool]:
        cache = StageCache(dir=str(root), mode=mode)
        got = cache.get_record(stage, KEY, parse=parse)
        if got is not None:
            return got, True
        cache.put_record(stage, KEY, {"what": stage}, value)  # what the case runner does on a miss
        return parse(value), False
    return read


def _reply_read(root: Path, mode: str) -> tuple[Any, bool]:
    cache = ReplyCache(StageCache(dir=str(root), mode=mode), "llm model 'm'")
    got = cache.get("chat", REQUEST, lambda e: isinstance(e.get("text"), str))
    if got is not None:
        return got, True
    cache.put("chat", REQUEST, REPLY)  # what the client does after its call
    return REPLY, False


ENTRIES = {
    "vectors": Entry("vectors", lambda r: _vectors_read(r, "read_write") and None,
                     lambda r: r / "index" / KEY, _vectors_read, (IDS, VECTORS.tolist())),
    "hits": Entry("hits", lambda r: _hits_read(r, "read_write") and None,
                  lambda r: r / "retrieval" / KEY, _hits_read, HITS),
    "answer": Entry("answer", lambda r: _record_read("answers", answer_record(ANSWER), answer_from)(r, "read_write")
                    and None, lambda r: r / "answers" / KEY[:2] / f"{KEY}.json",
                    _record_read("answers", answer_record(ANSWER), answer_from), ANSWER),
    "verdict": Entry("verdict", lambda r: _record_read("verdicts", VERDICT, verdict_from)(r, "read_write") and None,
                     lambda r: r / "verdicts" / KEY[:2] / f"{KEY}.json",
                     _record_read("verdicts", VERDICT, verdict_from), VERDICT),
    "reply": Entry("reply", lambda r: _reply_read(r, "read_write") and None,
                   lambda r: r / "llm" / REPLY_KEY[:2] / f"{REPLY_KEY}.json", _reply_read, REPLY),
}


# ------------------------------------------------------------------ corruptions
def _truncate(name: str) -> Callable[[Path], None]:
    def f(p: Path) -> None:
        target = p / name if p.is_dir() else p
        data = target.read_bytes()
        target.write_bytes(data[: len(data) // 2])
    return f


def _write(name: str, data: bytes) -> Callable[[Path], None]:
    def f(p: Path) -> None:
        (p / name if name else p).write_bytes(data)
    return f


def _npy(array: np.ndarray) -> Callable[[Path], None]:
    def f(p: Path) -> None:
        np.save(p / "vectors.npy", array)
    return f


def _edit_manifest(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def f(p: Path) -> None:
        manifest = json.loads((p / "manifest.json").read_text())
        (p / "manifest.json").write_text(json.dumps(change(manifest)))
    return f


def _drop_hash(m: dict[str, Any]) -> dict[str, Any]:
    del m["content_sha256"]
    return m


def _replace_by_file(p: Path) -> None:
    for child in p.iterdir():
        child.unlink()
    p.rmdir()
    p.write_text("not a folder")


def _record(value: Any, *, sha: bool | str = True) -> Callable[[Path], None]:
    """A record of valid JSON holding ``value``; with ``sha=True`` its hash is right (a shape problem)."""
    def f(p: Path) -> None:
        record: dict[str, Any] = {"manifest": {}, "value": value, "created": 0.0}
        if sha is True:
            record["sha256"] = json_sha256(value)
        elif sha:
            record["sha256"] = sha
        p.write_text(json.dumps(record))
    return f


def _edit_value(change: Callable[[Any], Any]) -> Callable[[Path], None]:
    """Changes the stored value and keeps the stored hash (same shape, other content)."""
    def f(p: Path) -> None:
        record = json.loads(p.read_text())
        key = "value" if "value" in record else None
        if key:
            record["value"] = change(record["value"])
        else:
            record = change(record)
        p.write_text(json.dumps(record))
    return f


def _set(key: str, value: Any) -> Callable[[Any], Any]:
    return lambda d: {**d, key: value}


CORRUPTIONS: list[tuple[str, str, Callable[[Path], None]]] = [
    ("vectors", "vectors.npy truncated", _truncate("vectors.npy")),
    ("vectors", "vectors.npy emptied", _write("vectors.npy", b"")),
    ("vectors", "vectors.npy garbage", _write("vectors.npy", b"\x93NUMPY garbage" * 10)),
    ("vectors", "vectors swapped, same shape", _npy(VECTORS[::-1].copy())),
    ("vectors", "vectors of another dimension", _npy(np.ones((5, 9), np.float32))),
    ("vectors", "vectors.npy deleted", lambda p: (p / "vectors.npy").unlink()),
    ("vectors", "ids.json truncated", _truncate("ids.json")),
    ("vectors", "ids.json valid JSON, wrong shape", _write("ids.json", b'{"c0": 1}')),
    ("vectors", "ids.json reordered, same shape", _write("ids.json", json.dumps(IDS[::-1]).encode())),
    ("vectors", "manifest deleted", lambda p: (p / "manifest.json").unlink()),
    ("vectors", "manifest truncated", _truncate("manifest.json")),
    ("vectors", "manifest a JSON list", _write("manifest.json", b"[1, 2]")),
    ("vectors", "content hash not a mapping", _edit_manifest(lambda m: {**m, "content_sha256": "abc"})),
    ("vectors", "content hash of the wrong file", _edit_manifest(
        lambda m: {**m, "content_sha256": {**m["content_sha256"], "vectors.npy": hashlib.sha256(b"x").hexdigest()}})),
    ("vectors", "entry folder replaced by a file", _replace_by_file),
    ("hits", "hits.json garbled", _write("hits.json", b"[[['c1', 0.9]")),
    ("hits", "hits.json valid JSON, wrong shape", _write("hits.json", b'[[["c1"]], {"a": 1}]')),
    ("hits", "hits swapped, same shape", _write("hits.json", b'[[["c2", 0.9], ["c1", 0.5]], [["c3", 0.7]]]')),
    ("answer", "record truncated", _truncate("")),
    ("answer", "record emptied", _write("", b"")),
    ("answer", "record not UTF-8", _write("", b"\xff\xfe\x00garbage")),
    ("answer", "record a JSON list", _write("", b"[1, 2, 3]")),
    ("answer", "valid JSON, wrong shape (text a number)", _record({**answer_record(ANSWER), "text": 3})),
    ("answer", "valid JSON, wrong shape (no usage)", _record({"text": "Paris", "model": "m"})),
    ("answer", "old record without hash, wrong shape", _record({"txt": "Paris"}, sha=False)),
    ("answer", "text edited, same shape", _edit_value(_set("text", "Lyon [1]"))),
    ("verdict", "score a string", _record({"judge/score": "high"})),
    ("verdict", "verdict a JSON list", _record([4.0])),
    ("verdict", "score edited, same shape", _edit_value(_set("judge/score", 1.0))),
    ("reply", "reply truncated", _truncate("")),
    ("reply", "reply a JSON list", _write("", b'["Paris"]')),
    ("reply", "reply not UTF-8", _write("", b"\xff\xfe\x00garbage")),
    ("reply", "reply text edited, same shape", _edit_value(_set("text", "Lyon"))),
]


def _snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every path under ``root`` with size, mtime and content hash (folders too: a mkdir shows)."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.stat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        out[p.relative_to(root).as_posix()] = (st.st_size if p.is_file() else 0, st.st_mtime_ns, digest)
    return out


def _corrupted(tmp_path: Path, kind: str, corrupt: Callable[[Path], None]) -> tuple[Entry, Path]:
    entry = ENTRIES[kind]
    root = tmp_path / "cache"
    entry.create(root)
    assert entry.read(root, "read_write") == (entry.expected, True)  # the intact entry is served
    corrupt(entry.path(root))
    return entry, root


@pytest.mark.parametrize(("kind", "what", "corrupt"), CORRUPTIONS, ids=[c[1] for c in CORRUPTIONS])
def test_read_write_rebuilds_a_corrupt_entry(tmp_path, caplog, kind, what, corrupt):
    entry, root = _corrupted(tmp_path, kind, corrupt)
    with caplog.at_level(logging.WARNING):
        value, hit = entry.read(root, "read_write")
    assert (value, hit) == (entry.expected, False)  # rebuilt: the right value, never the corrupt one
    assert "is corrupt" in caplog.text and entry.path(root).stem in caplog.text  # the warning names the entry
    assert entry.read(root, "read_write") == (entry.expected, True)  # and the rebuilt entry is sound


@pytest.mark.parametrize(("kind", "what", "corrupt"), CORRUPTIONS, ids=[c[1] for c in CORRUPTIONS])
def test_read_only_refuses_a_corrupt_entry_and_writes_nothing(tmp_path, kind, what, corrupt):
    entry, root = _corrupted(tmp_path, kind, corrupt)
    before = _snapshot(root)
    key = entry.path(root).stem
    with pytest.raises(CacheCorruptError, match=rf"{key}.* is corrupt: .*\n  fix: rerun with cache.mode=read_write"):
        entry.read(root, "read_only")
    assert _snapshot(root) == before


def test_corrupt_entries_are_counted_for_mlflow(tmp_path):
    root = tmp_path / "cache"
    ENTRIES["vectors"].create(root)
    _npy(VECTORS[::-1].copy())(root / "index" / KEY)
    cache = StageCache(dir=str(root))
    cache.folder("index", KEY, {}, build=lambda: (IDS, VECTORS), save=save_vectors, load=lambda f, m: load_vectors(f))
    assert cache.counters() == {"cache/index/hits": 0.0, "cache/index/misses": 1.0, "cache/index/corrupt": 1.0}
    assert "cache/index/corrupt" not in StageCache(dir=str(root)).counters()  # a sound run logs no such key


def test_old_record_of_the_right_shape_is_still_served(tmp_path):
    """Records written before content hashes existed: their shape is checked, the value is served."""
    root = tmp_path / "cache"
    path = ENTRIES["answer"].path(root)
    path.parent.mkdir(parents=True)
    _record(answer_record(ANSWER), sha=False)(path)
    assert StageCache(dir=str(root), mode="read_only").get_record("answers", KEY, parse=answer_from) == ANSWER


def test_an_entry_from_before_content_hashes_is_rebuilt_once_or_refused(tmp_path, caplog):
    root = tmp_path / "cache"
    ENTRIES["vectors"].create(root)
    _edit_manifest(_drop_hash)(root / "index" / KEY)
    before = _snapshot(root)
    with pytest.raises(CacheCorruptError, match=r"written by an older ragbench, without a content hash"):
        _vectors_read(root, "read_only")  # cannot be verified: refused, nothing written
    assert _snapshot(root) == before
    cache = StageCache(dir=str(root))
    with caplog.at_level(logging.INFO):
        value, hit = cache.folder("index", KEY, {}, build=lambda: (IDS, VECTORS), save=save_vectors,
                                  load=lambda f, m: load_vectors(f))
    assert not hit and "predates content hashes; rebuilding it once" in caplog.text
    assert "cache/index/corrupt" not in cache.counters()  # an upgrade, not damage
    assert _vectors_read(root, "read_only") == (ENTRIES["vectors"].expected, True)
