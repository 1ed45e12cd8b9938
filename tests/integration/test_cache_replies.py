"""LLM replies without a stage record (here query=multi_query's phrasings) are records of the one store and
follow cache.mode through real jobs: read_write fills and a rerun sends no request, refresh asks again and
overwrites, off asks again and writes nothing, read_only serves and writes nothing."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.jobs import run_job
from tests.fixtures.llm_server import LLMServer

pytestmark = pytest.mark.slow
CASES = 3


@pytest.fixture(scope="module")
def server() -> Iterator[LLMServer]:
    with LLMServer() as srv:
        yield srv


def _job(server: LLMServer, cache_dir: Path, *extra: str) -> list[str]:
    return ["dataset=qasper", f"dataset.sample_size={CASES}", "retrieval=bm25", f"cache.dir={cache_dir}",
            "query=multi_query", f"query.transform.client.api_base={server.url}",
            "query.transform.client.api_key_env=RAGBENCH_REPLIES_IT_KEY", "query.transform.client.num_retries=0",
            "resume=false", *extra]


def _replies(cache_dir: Path) -> dict[str, str]:
    """Each LLM reply record with the hash of its bytes (a rewrite with a new ``created`` shows)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((cache_dir / "llm").rglob("*.json"))}


def _snapshot(root: Path) -> dict[str, tuple[int, str]]:
    return {p.relative_to(root).as_posix(): (p.stat().st_mtime_ns, "dir" if p.is_dir() else
                                             hashlib.sha256(p.read_bytes()).hexdigest()) for p in sorted(root.rglob("*"))}


def test_llm_reply_records_follow_cache_mode(tmp_path, server, monkeypatch):
    monkeypatch.setenv("RAGBENCH_REPLIES_IT_KEY", "none")
    cache_dir = tmp_path / "cache"
    server.reset()
    first, _ = run_job(_job(server, cache_dir), tmp_path)
    asked = server.count
    assert first.info.status == "FINISHED" and asked == 1 + CASES  # the preflight, one call per question
    filled = _replies(cache_dir)
    assert len(filled) == 1 + CASES
    assert first.data.metrics["cache/llm/misses"] == 1 + CASES

    server.reset()
    again, _ = run_job(_job(server, cache_dir), tmp_path)  # read_write: a rerun sends no request
    assert again.info.status == "FINISHED" and server.count == 0
    assert again.data.metrics["cache/llm/hits"] == 1 + CASES and _replies(cache_dir) == filled

    server.reset()
    before = _snapshot(cache_dir)
    read_only, _ = run_job(_job(server, cache_dir, "cache.mode=read_only"), tmp_path)
    assert server.count == 0 and _snapshot(cache_dir) == before  # served, nothing written

    server.reset()
    refreshed, _ = run_job(_job(server, cache_dir, "cache.mode=refresh"), tmp_path)
    assert server.count == asked  # never served from the cache ...
    rewritten = _replies(cache_dir)
    assert set(rewritten) == set(filled) and all(rewritten[k] != filled[k] for k in filled)  # ... every record rewritten

    server.reset()
    before = _snapshot(cache_dir)
    off, _ = run_job(_job(server, cache_dir, "cache.mode=off"), tmp_path)
    assert server.count == asked and _snapshot(cache_dir) == before  # asked again, nothing written
    metric = {k: v for k, v in first.data.metrics.items() if k.startswith(("retrieval/", "answer/"))}
    for run in (again, read_only, refreshed, off):
        assert {k: run.data.metrics[k] for k in metric} == metric
