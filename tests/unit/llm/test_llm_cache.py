"""ResponseCache and cache keys: stable, content-addressed, atomic, tolerant of corrupt entries."""

from __future__ import annotations

import logging

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
