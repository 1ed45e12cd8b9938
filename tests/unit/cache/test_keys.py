"""The one key function: stage cache and LLM response cache keys stay what they were (a changed key
would silently recompute every entry and re-pay every LLM call)."""

from __future__ import annotations

from ragbench.cache.files import json_sha256
from ragbench.cache.store import make_key
from ragbench.llm.cache import cache_key


def test_stage_keys_are_pinned():
    parts = {"stage": "answers", "question": "Wo ist 北京? café", "contexts": [["t", "x"]], "n": 1.5}
    assert make_key(parts) == "952da27c8875469290a1630ed1792b3d83e0e4dc7c7f93a65450029aee2b7f24"


def test_llm_keys_are_pinned():
    request = {"model": "m", "messages": [{"role": "user", "content": "北京 café"}], "params": {"temperature": 0.0}}
    assert cache_key("chat", request) == "8f9fc1b30492dad25e333a3da4ed00f2a11d1b88c6bb0ac60035f27e8db9c606"


def test_content_hash_survives_a_json_round_trip():
    import json

    value = {"text": "北京 [1]", "scores": [0.1, 1e-300, 2.5], "nested": {"b": 1, "a": None}, "t": (1, 2)}
    assert json_sha256(json.loads(json.dumps(value))) == json_sha256(value)
