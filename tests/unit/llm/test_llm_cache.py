"""ResponseCache and cache keys: stable, content-addressed, atomic, tolerant of corrupt entries."""

from __future__ import annotations

import logging

import pytest

from ragbench.cache.mode import CacheMode
from ragbench.errors import ConfigError
from ragbench.llm.cache import ResponseCache, cache_key, default_cache_dir

MSGS = [{"role": "user", "content": "hi"}]


def test_key_is_stable_and_ignores_mapping_order():
    a = cache_key("chat", {"model": "m", "messages": MSGS, "params": {"temperature": 0, "max_tokens": 5}})
    b = cache_key("chat", {"params": {"max_tokens": 5, "temperature": 0}, "messages": MSGS, "model": "m"})
    assert a == b and len(a) == 64


def test_key_changes_with_model_messages_params_and_kind():
    base = {"model": "m", "messages": MSGS, "params": {"temperature": 0}}
    keys = {
        cache_key("chat", base),
        cache_key("chat", {**base, "model": "m2"}),
        cache_key("chat", {**base, "messages": [{"role": "user", "content": "hi!"}]}),
        cache_key("chat", {**base, "params": {"temperature": 0.5}}),
        cache_key("chat", {**base, "params": {"temperature": 0, "repeat": 1}}),
        cache_key("embedding", base),
    }
    assert len(keys) == 6


def test_put_get_roundtrip_leaves_no_temporary_files(tmp_path):
    cache = ResponseCache(tmp_path)
    key = cache_key("chat", {"x": 1})
    assert cache.get(key) is None
    cache.put(key, {"text": "Paris", "prompt_tokens": 3})
    assert cache.get(key) == {"text": "Paris", "prompt_tokens": 3}
    assert cache.path(key).parent.name == key[:2]
    assert [p.name for p in cache.path(key).parent.iterdir()] == [f"{key}.json"]


def test_corrupt_entry_is_a_miss_with_a_warning(tmp_path, caplog):
    cache = ResponseCache(tmp_path)
    key = cache_key("chat", {"x": 2})
    cache.path(key).parent.mkdir(parents=True)
    cache.path(key).write_text("{not json")
    with caplog.at_level(logging.WARNING):
        assert cache.get(key) is None
    assert "unreadable" in caplog.text
    cache.put(key, {"text": "fixed"})
    assert cache.get(key) == {"text": "fixed"}


def test_default_dir_follows_ragbench_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGBENCH_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path / "llm"


def test_read_only_serves_and_never_writes(tmp_path):
    key = cache_key("chat", {"x": 3})
    ResponseCache(tmp_path / "llm").put(key, {"text": "stored"})
    before = sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    ro = ResponseCache(tmp_path / "llm", "read_only")
    assert ro.get(key) == {"text": "stored"}
    ro.put(key, {"text": "new"})
    ro.put(cache_key("chat", {"x": 4}), {"text": "other"})
    assert sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before
    ResponseCache(tmp_path / "fresh", "read_only").put(key, {"text": "x"})
    assert not (tmp_path / "fresh").exists()  # not even a folder


def test_refresh_writes_and_never_serves(tmp_path):
    key = cache_key("chat", {"x": 5})
    ResponseCache(tmp_path).put(key, {"text": "old"})
    refresh = ResponseCache(tmp_path, "refresh")
    assert refresh.get(key) is None
    refresh.put(key, {"text": "new"})
    assert ResponseCache(tmp_path).get(key) == {"text": "new"}


def test_a_failed_write_is_a_warning_not_a_failed_case(tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder should be")
    cache = ResponseCache(blocked / "llm")
    with caplog.at_level(logging.WARNING):
        cache.put(cache_key("chat", {"x": 6}), {"text": "paid for"})
        cache.put(cache_key("chat", {"x": 7}), {"text": "paid for"})
    assert caplog.text.count("cannot write llm cache entry") == 1 and "cache.mode=read_only" in caplog.text


@pytest.mark.parametrize(("mode", "use_cache"), [
    ("read_write", True), ("read_only", "read_only"), ("refresh", False), ("off", False),
])
def test_llm_cache_follows_cache_mode(mode, use_cache):
    from omegaconf import OmegaConf

    import ragbench  # noqa: F401 - registers the resolver

    cfg = OmegaConf.create({"cache": {"mode": mode}, "llm": {"use_cache": "${llm_cache:${cache.mode}}"}})
    assert cfg.llm.use_cache == use_cache
    assert CacheMode.parse(cfg.llm.use_cache).writes == (mode == "read_write")


def test_use_cache_names_the_valid_modes():
    with pytest.raises(ConfigError, match=r"llm.use_cache='sometimes' is not valid; choose one of: read_write"):
        ResponseCache("x", "sometimes")
