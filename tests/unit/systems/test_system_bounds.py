"""Bounds on what an outside system may send back, and its settings named as the user sets them: a
``system=python`` reply larger than ``system.max_record_chars`` or nested too deep fails its case (not
2 GB of memory, not a RecursionError); ``max_record_chars=-1`` and ``timeout=0`` are one line naming
``system.*``; a basic-auth URL is sent as an Authorization header and its password is masked."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hydra import compose, initialize_config_module

from ragbench import redact
from ragbench.config_check import check_config
from ragbench.errors import ConfigError
from ragbench.llm.errors import LLMConnectionError, LLMReplyTooLargeError, LLMResponseError
from ragbench.systems.http_system import HttpSystem
from ragbench.systems.python_system import PythonSystem
from ragbench.types import Query

QUERY = Query(qid="q1", text="What is the cat called?", answers=("Tom",), question_type="factual")
CALLS: list[str] = []
REPLY: dict[str, Any] = {}


def answer(question: str) -> Any:
    """The stand-in function: returns ``REPLY["value"]``."""
    CALLS.append(question)
    return REPLY["value"]


def _system(**kw: Any) -> PythonSystem:
    CALLS.clear()
    return PythonSystem(target=f"{__name__}:answer", num_retries=2, backoff_s=0.0, **kw)


def test_a_python_reply_over_max_record_chars_fails_its_case_without_retry() -> None:
    REPLY["value"] = {"answer": "x" * 5_000, "contexts": [{"text": "The cat is called Tom."}]}
    with pytest.raises(LLMReplyTooLargeError, match=r"longer than system.max_record_chars=1,000"):
        _system(max_record_chars=1_000).record(QUERY)
    assert len(CALLS) == 1  # the same question gets the same reply: not asked again
    REPLY["value"] = json.dumps(REPLY["value"])  # a JSON string is bounded the same way
    with pytest.raises(LLMReplyTooLargeError):
        _system(max_record_chars=1_000).record(QUERY)


def test_a_python_reply_within_the_bound_is_read() -> None:
    REPLY["value"] = {"answer": "Tom", "contexts": [{"text": "The cat is called Tom."}]}
    assert _system(max_record_chars=1_000).record(QUERY).answer == "Tom"


@pytest.mark.parametrize("deep", ["[" * 100_000 + "]" * 100_000, "nested objects"])
def test_a_reply_nested_too_deep_is_one_named_error(deep: str) -> None:
    value: Any = deep
    if deep == "nested objects":
        value = {"answer": "Tom", "contexts": []}
        for _ in range(100_000):
            value = {"metadata": value}
    REPLY["value"] = value
    with pytest.raises(LLMResponseError, match="nested too deep") as info:
        PythonSystem(target=f"{__name__}:answer", num_retries=0).record(QUERY)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("kw", [{"max_record_chars": -1}, {"max_record_chars": 0}, {"timeout": 0}])
def test_bad_limits_are_one_line_naming_the_system_key(kw: dict[str, Any]) -> None:
    key = next(iter(kw))
    for make in (lambda: _system(**kw), lambda: HttpSystem(url="http://127.0.0.1:9/answer", **kw)):
        with pytest.raises(ConfigError, match=rf"^system\.{key} must be"):
            make()


def _composed(overrides: list[str]) -> Any:
    with initialize_config_module(config_module="ragbench.conf", version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


@pytest.mark.parametrize(("overrides", "named"), [
    (["system=http", "system.url=http://127.0.0.1:9/a", "system.timeout=0"], "system.timeout=0"),
    (["system=python", "system.target=x:y", "system.max_record_chars=-1"], "system.max_record_chars=-1"),
    (["system=responses", "system.path=r.jsonl", "system.max_record_chars=-1"], "system.max_record_chars=-1"),
])
def test_the_config_check_names_the_users_key(overrides: list[str], named: str) -> None:
    """Not ``retrieval.retriever.source.timeout``: the key a system value is interpolated into."""
    with pytest.raises(ConfigError) as info:
        check_config(_composed(overrides))
    assert str(info.value).startswith(f"{named} is not valid")


@pytest.fixture()
def auth_server() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            ask = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(self.headers.get("Authorization", ""))
            body = json.dumps({"qid": ask["qid"], "answer": "Tom", "contexts": []}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def test_a_basic_auth_url_is_sent_as_a_header_and_masked(auth_server: tuple[str, list[str]]) -> None:
    host, seen = auth_server
    password = "s3cret-basic-pass-77"
    url = f"http://alice:{password}@{host}/answer"
    system = HttpSystem(url=url, num_retries=0)
    assert system.record(QUERY).answer == "Tom"
    assert seen == ["Basic " + base64.b64encode(f"alice:{password}".encode()).decode()]
    assert password not in system.identity and password not in system.client.where
    assert system.client.where == f"system at http://alice:***@{host}/answer"
    assert password not in redact.redact(f"run name: system.url={url}")  # run names, params, tags, logs

    down = HttpSystem(url=f"http://alice:{password}@127.0.0.1:9/answer", num_retries=0, backoff_s=0.0)
    with pytest.raises(LLMConnectionError) as info:
        down.record(QUERY)
    assert password not in str(info.value) and "alice:***@" in str(info.value)


def test_a_basic_auth_url_in_the_config_is_registered_before_any_sink() -> None:
    password = "config-basic-pass-4242"
    redact.check_config({"system": {"url": f"https://bob:{password}@rag.example/answer"}})
    assert redact.redact(f"system.url=https://bob:{password}@rag.example/answer") == (
        "system.url=https://***@rag.example/answer")
    redact.register_overrides([f"system.url=http://carol:{password}x@h/a"])
    assert password not in redact.redact(f"http://carol:{password}x@h/a")


def test_a_basic_auth_url_with_an_api_key_env_too_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_KEY", "sk-bearer-key-123456")
    with pytest.raises(ConfigError, match=r"carries a user and password and system.api_key_env") as info:
        HttpSystem(url="http://u:pass-word-9876@127.0.0.1:9/a", api_key_env="RAG_KEY")
    assert "pass-word-9876" not in str(info.value)
