"""LLM replies as records of the one store: keyed by ``reply_key`` (= ``make_key``), content-addressed,
atomic, tolerant of corrupt records, and following ``cache.mode`` exactly like answers and verdicts."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ragbench.cache.keys import reply_key
from ragbench.cache.replies import job_store, reply_store
from ragbench.cache.store import StageCache
from ragbench.errors import CacheCorruptError
from ragbench.llm.cache import ReplyCache
from ragbench.llm.client import LLMClient

MSGS = [{"role": "user", "content": "hi"}]


def ANY(entry: dict) -> bool:  # noqa: N802 - a predicate that accepts every stored reply
    return True


def _cache(root: Path, mode: str = "read_write") -> ReplyCache:
    return ReplyCache(StageCache(dir=str(root), mode=mode), "llm model 'm'")


def _path(root: Path, request: dict) -> Path:
    key = reply_key("chat", request)
    return root / "llm" / key[:2] / f"{key}.json"


def _files(root: Path) -> list[tuple[Path, int]]:
    return sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*"))


def test_key_is_stable_and_ignores_mapping_order():
    a = reply_key("chat", {"model": "m", "messages": MSGS, "params": {"temperature": 0, "max_tokens": 5}})
    b = reply_key("chat", {"params": {"max_tokens": 5, "temperature": 0}, "messages": MSGS, "model": "m"})
    assert a == b and len(a) == 64


def test_key_changes_with_model_messages_params_and_kind():
    base = {"model": "m", "messages": MSGS, "params": {"temperature": 0}}
    keys = {
        reply_key("chat", base),
        reply_key("chat", {**base, "model": "m2"}),
        reply_key("chat", {**base, "messages": [{"role": "user", "content": "hi!"}]}),
        reply_key("chat", {**base, "params": {"temperature": 0.5}}),
        reply_key("chat", {**base, "params": {"temperature": 0, "repeat": 1}}),
        reply_key("embedding", base),
    }
    assert len(keys) == 6


def test_put_get_roundtrip_leaves_no_temporary_files(tmp_path):
    cache = _cache(tmp_path)
    request = {"x": 1}
    assert cache.get("chat", request, ANY) is None
    cache.put("chat", request, {"text": "Paris", "prompt_tokens": 3})
    assert cache.get("chat", request, ANY) == {"text": "Paris", "prompt_tokens": 3}
    assert [p.name for p in _path(tmp_path, request).parent.iterdir()] == [_path(tmp_path, request).name]
    assert cache.store.counters() == {"cache/llm/hits": 1.0, "cache/llm/misses": 1.0}


def test_a_reply_the_caller_cannot_use_is_a_miss(tmp_path):
    cache = _cache(tmp_path)
    cache.put("chat", {"x": 1}, {"text": 3})
    assert cache.get("chat", {"x": 1}, lambda e: isinstance(e.get("text"), str)) is None


def test_corrupt_record_is_a_miss_with_a_warning_then_replaced(tmp_path, caplog):
    cache = _cache(tmp_path)
    path = _path(tmp_path, {"x": 2})
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with caplog.at_level(logging.WARNING):
        assert cache.get("chat", {"x": 2}, ANY) is None
    assert "is corrupt" in caplog.text and path.stem in caplog.text
    cache.put("chat", {"x": 2}, {"text": "fixed"})
    assert cache.get("chat", {"x": 2}, ANY) == {"text": "fixed"}


def test_read_only_serves_and_never_writes(tmp_path):
    _cache(tmp_path).put("chat", {"x": 3}, {"text": "stored"})
    before = _files(tmp_path)
    ro = _cache(tmp_path, "read_only")
    assert ro.get("chat", {"x": 3}, ANY) == {"text": "stored"}
    ro.put("chat", {"x": 3}, {"text": "new"})
    ro.put("chat", {"x": 4}, {"text": "other"})
    assert _files(tmp_path) == before
    _cache(tmp_path / "fresh", "read_only").put("chat", {"x": 3}, {"text": "x"})
    assert not (tmp_path / "fresh").exists()  # not even a folder


def test_read_only_refuses_a_corrupt_record(tmp_path):
    path = _path(tmp_path, {"x": 8})
    path.parent.mkdir(parents=True)
    path.write_text("[1, 2]")
    with pytest.raises(CacheCorruptError, match=r"is corrupt: .*\n  fix: rerun with cache.mode=read_write"):
        _cache(tmp_path, "read_only").get("chat", {"x": 8}, ANY)


def test_refresh_writes_and_never_serves(tmp_path):
    _cache(tmp_path).put("chat", {"x": 5}, {"text": "old"})
    refresh = _cache(tmp_path, "refresh")
    assert refresh.get("chat", {"x": 5}, ANY) is None
    refresh.put("chat", {"x": 5}, {"text": "new"})
    assert _cache(tmp_path).get("chat", {"x": 5}, ANY) == {"text": "new"}


def test_off_neither_serves_nor_writes(tmp_path):
    _cache(tmp_path).put("chat", {"x": 9}, {"text": "old"})
    before = _files(tmp_path)
    off = _cache(tmp_path, "off")
    assert off.get("chat", {"x": 9}, ANY) is None
    off.put("chat", {"x": 10}, {"text": "new"})
    assert _files(tmp_path) == before


def test_a_failed_write_is_a_warning_not_a_failed_case(tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder should be")
    cache = _cache(blocked)
    with caplog.at_level(logging.WARNING):
        cache.put("chat", {"x": 6}, {"text": "paid for"})
        cache.put("chat", {"x": 7}, {"text": "paid for"})
    assert caplog.text.count("cannot write llm cache entry") == 1 and "cache.mode=read_only" in caplog.text


def test_a_client_takes_the_store_of_whoever_builds_it(tmp_path):
    store = StageCache(dir=str(tmp_path))
    assert LLMClient(model="openai/m").cache is None  # built by hand: no store, nothing cached
    with reply_store(store):
        built = LLMClient(model="openai/m")
        assert job_store() is store
    assert built.cache is not None and built.cache.store is store
    assert job_store() is None  # the store is the builder's, for the build only
    assert LLMClient(model="openai/m", cache=store).cache.store is store  # or passed explicitly
