"""llm.max_concurrency: null against real HTTP servers on 127.0.0.1: llama.cpp's /props total_slots sets the
cases run at once, a server without it (vLLM) gets the default, and the key never leaves the header."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hydra import compose, initialize_config_module
from hydra.utils import instantiate

from ragbench.llm.slots import DEFAULT, server_slots

SECRET = "sk-slots-canary-5d1e"


def _server(props: dict | None) -> tuple[ThreadingHTTPServer, list[tuple[str, str | None]]]:
    seen: list[tuple[str, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            seen.append((self.path, self.headers.get("Authorization")))
            if props is None or self.path != "/props":
                self.send_error(404)
                return
            body = json.dumps(props).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):  # noqa: N802 - the preflight's chat request
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((self.path, self.headers.get("Authorization")))
            body = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "local-model",
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": "OK"}}],
                               "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


@pytest.fixture
def llama():
    server, seen = _server({"total_slots": 3, "chat_template": "x" * 5000, "model_path": "smollm2.gguf"})
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    server.shutdown()


def _generator(api_base: str, *extra: str):
    with initialize_config_module(config_module="ragbench.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=["llm=openai_compatible", f"llm.api_base={api_base}", *extra])
    return instantiate(cfg.llm)


def test_a_llama_cpp_server_sets_the_concurrency(llama, monkeypatch, caplog):
    base, seen = llama
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with caplog.at_level(logging.DEBUG):
        gen = _generator(base)
        assert seen == []  # building opens no connection
        gen.preflight()  # before the case loop: the slots, then the tiny request
    assert gen.max_concurrency == 3 and gen.client.max_concurrency == 3  # 3 cases at once, 3 calls in flight
    assert seen == [("/props", f"Bearer {SECRET}"), ("/v1/chat/completions", f"Bearer {SECRET}")]
    assert "total_slots" in caplog.text and SECRET not in caplog.text
    fixed = _generator(base, "llm.max_concurrency=5")
    assert fixed.client.follow_slots() == 5 and fixed.max_concurrency == 5  # a number is kept, not asked
    assert len(seen) == 2


def test_a_server_that_does_not_say_gets_the_default(monkeypatch):
    server, seen = _server(None)  # vLLM: no /props
    monkeypatch.setenv("OPENAI_API_KEY", "none")
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        gen = _generator(base)
        assert gen.client.follow_slots() == DEFAULT and gen.max_concurrency == DEFAULT
        assert seen == [("/props", "Bearer none")]
    finally:
        server.shutdown()
    assert server_slots(base, timeout=0.5) is None  # gone: no answer, no error
