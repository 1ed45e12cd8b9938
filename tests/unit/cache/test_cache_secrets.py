"""The stage cache's per-case entries never hold a registered secret, whichever path made the value:
``put_record`` masks every string (answers, verdicts, replies) before it writes (docs/llm.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragbench import redact
from ragbench.cache.store import StageCache, make_key

KEY = "sk-cache-0123456789abcdef"


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact, "_secrets", set())
    monkeypatch.setattr(redact, "_pattern", None)


def test_put_record_masks_registered_secrets_in_value_and_manifest(tmp_path: Path) -> None:
    redact.register(KEY)
    cache = StageCache(dir=str(tmp_path))
    key = make_key({"stage": "answers", "qid": "q1"})
    value = {"text": f"the key is {KEY}", "citations": [1, 2], "usage": {"prompt_tokens": 3},
             "notes": [{"reason": f"saw {KEY}"}], "vector": [0.5, 1.5]}
    cache.put_record("answers", key, {"generator": f"system:{KEY}", "qid": "q1"}, value)
    stored = next((tmp_path / "answers").rglob("*.json")).read_text(encoding="utf-8")
    assert KEY not in stored and stored.count("***") == 3
    again = cache.get_record("answers", key)  # its content hash is the masked value's: a hit, not corrupt
    assert again == {**value, "text": "the key is ***", "notes": [{"reason": "saw ***"}]}
    assert cache.corrupt["answers"] == 0 and cache.hits["answers"] == 1
