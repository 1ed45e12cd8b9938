"""A cached preflight still checks that something listens at ``api_base``: a server that is down fails the
job before the ingest. ``cache.mode=read_only`` replays the cache with no server."""

from __future__ import annotations

import socket

import pytest

from ragbench.cache.store import StageCache
from ragbench.llm.client import PREFLIGHT, PREFLIGHT_PROMPT, LLMClient
from ragbench.llm.errors import LLMConnectionError


def _cached_client(tmp_path, port: int, mode: str = "read_write") -> LLMClient:
    store = StageCache(dir=str(tmp_path / "cache"), mode="read_write")
    writer = LLMClient(model="openai/m", api_base=f"http://127.0.0.1:{port}/v1", cache=store)
    request = writer._request([{"role": "user", "content": PREFLIGHT_PROMPT}], {PREFLIGHT: 1})
    writer.cache.put("chat", request, {"text": "ok", "prompt_tokens": 1, "completion_tokens": 1})
    return LLMClient(model="openai/m", api_base=f"http://127.0.0.1:{port}/v1",
                     cache=StageCache(dir=str(tmp_path / "cache"), mode=mode))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_cached_preflight_with_the_server_down_fails_up_front(tmp_path):
    port = _free_port()  # nothing listens there
    with pytest.raises(LLMConnectionError, match=rf"nothing answers at 127.0.0.1:{port}.*cache.mode=read_only"):
        _cached_client(tmp_path, port).preflight()


def test_a_cached_preflight_with_the_server_up_sends_nothing(tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        _cached_client(tmp_path, server.getsockname()[1]).preflight()  # a connect, no request: no error


def test_read_only_replays_the_cache_without_a_server(tmp_path):
    _cached_client(tmp_path, _free_port(), mode="read_only").preflight()
