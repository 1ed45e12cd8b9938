"""Issue 47.8: the client can ask for structured output (``response_format``, in the reply-cache key and a
batch line's body), and the LLM judge asks for its verdict schema when ``judge.structured_output`` is on
(default: on for a self-hosted endpoint, one named by ``api_base``), recorded as the run's param
``judge/structured_output``. The provider call is a stand-in (no litellm)."""

from __future__ import annotations

from typing import Any

import pytest

from ragbench.cache.keys import reply_key
from ragbench.errors import ConfigError
from ragbench.judge.llm import LLMJudge
from ragbench.llm.client import LLMClient
from ragbench.types import Answer, Context, Level, Query, Usage

MSGS = [{"role": "user", "content": "grade it"}]
FORMAT = {"type": "json_schema", "json_schema": {"name": "v", "schema": {"type": "object"}}}


def test_response_format_enters_the_key_and_the_batch_body_only_when_asked():
    client = LLMClient(model="openai/m", cache=None)
    plain, asked = client._request(MSGS, None), client._request(MSGS, None, FORMAT)
    assert "response_format" not in plain  # the keys of plain requests are unchanged
    assert reply_key("chat", plain) != reply_key("chat", asked)
    assert client._body(asked)["response_format"] == FORMAT and "response_format" not in client._body(plain)


def test_the_judge_asks_for_its_verdict_schema_on_a_self_hosted_endpoint(monkeypatch):
    local = LLMJudge(
        model="openai/judge", api_base="http://127.0.0.1:9/v1", metrics=["accuracy", "relevance"]
    )
    hosted = LLMJudge(model="openai/judge", metrics=["accuracy"])
    forced = LLMJudge(model="openai/judge", metrics=["accuracy"], structured_output=True)
    assert (
        local.log_params()["judge/structured_output"]
        == "json_schema"
        == forced.log_params()["judge/structured_output"]
    )
    assert (
        hosted.log_params()["judge/structured_output"] == "off" and hosted.response_format("accuracy") is None
    )
    assert "structured_output=json_schema" in local.identity and "structured_output" not in hosted.identity
    schema = local.response_format("relevance")["json_schema"]["schema"]  # type: ignore[index]
    assert schema["required"] == ["score", "reasoning"] and schema["properties"]["score"]["enum"] == [
        0,
        1,
        2,
        3,
        4,
    ]
    sent: list[Any] = []

    def complete(
        messages: Any, *, key_extra: Any = None, cache_if: Any = None, response_format: Any = None
    ) -> Any:
        sent.append(response_format)
        return type("R", (), {"text": '{"score": 4, "reasoning": "ok"}', "usage": Usage()})()

    monkeypatch.setattr(local.client, "complete", complete)
    q = Query(qid="q", text="Where?", answers=("the lake",), question_type="single_hop")
    ctx = (Context(chunk_id="c", text="the lake", title="t", level=Level.PARAGRAPH, hit_ids=("c",)),)
    assert local.judge(q, ctx, Answer(text="the lake", model="openai/gen"))["judge/accuracy"] == 1.0
    assert sent == [local.response_format("accuracy"), local.response_format("relevance")] and all(sent)


def test_structured_output_is_checked_against_the_provider_at_preflight(monkeypatch):
    judge = LLMJudge(model="openai/judge", structured_output=True)
    monkeypatch.setattr(judge.client, "preflight", lambda: None)
    monkeypatch.setattr(judge.client, "supports_response_format", lambda: False)
    with pytest.raises(ConfigError, match="fix: set judge.structured_output=false"):
        judge.preflight()
    with pytest.raises(ConfigError, match="judge.structured_output must be true, false or null"):
        LLMJudge(model="openai/judge", structured_output="yes")  # type: ignore[arg-type]
