"""LLMGenerator against the loopback server: prompt sent, citations parsed, usage and identity."""

from __future__ import annotations

import pytest

from ragbench.errors import ConfigError
from ragbench.generate.llm import LLMGenerator
from ragbench.protocols import Generator
from ragbench.types import Context, Level, Query
from tests.fixtures.llm_server import Step

Q = Query(qid="q1", text="When did Mel paint a lake?", answers=("7 May 2023",), question_type="temporal")
CTX = (
    Context(
        chunk_id="a",
        text="Mel: I painted a lake yesterday!",
        title="Session 1 (DATE: 8 May 2023)",
        level=Level.PARAGRAPH,
        hit_ids=("a",),
    ),
    Context(
        chunk_id="b", text="Caroline went hiking.", title="Session 2", level=Level.PARAGRAPH, hit_ids=("b",)
    ),
)


@pytest.fixture()
def generator(llm_server, cache_dir, monkeypatch):
    monkeypatch.setenv("RAGBENCH_GEN_KEY", "sk-gen-key-123")
    return LLMGenerator(
        model="openai/gen-model",
        api_base=llm_server.url,
        api_key_env="RAGBENCH_GEN_KEY",
        num_retries=1,
        backoff_s=0.01,
        timeout=5,
        max_concurrency=4,
        dataset="locomo",
    )


def test_satisfies_the_generator_protocol(generator):
    assert isinstance(generator, Generator)
    assert generator.max_concurrency == 4
    assert generator.identity == (
        f"openai/gen-model(prompt={generator.prompt.hash},temperature=0.0,max_tokens=256,"
        f"api_base={generator.client.api_base},dataset=locomo)"
    )
    params = generator.log_params()
    assert params["llm/prompt_hash"] == generator.prompt.hash and params["llm/prompt_file"].endswith(
        "default.yaml"
    )


def test_answer_strips_citations_and_records_usage(generator, llm_server):
    llm_server.script(Step(text="7 May 2023 [ref_1]."))
    answer = generator.answer(Q, CTX)
    assert answer.text == "7 May 2023." and answer.citations == (1,)
    assert answer.model == "openai/gen-model" and answer.latency_s > 0  # the bare model string
    assert answer.usage.completion_tokens == 4 and answer.usage.prompt_tokens > 50 and not answer.usage.cached
    user = llm_server.requests[0]["messages"][1]["content"]
    assert (
        "DATE" in user and '<reference id="ref_2" title="Session 2">' in user
    )  # temporal instruction + refs
    assert llm_server.requests[0]["temperature"] == 0.0 and llm_server.requests[0]["max_tokens"] == 256


def test_default_fixture_reply_quotes_ref_1(generator, llm_server):
    answer = generator.answer(Q, CTX)
    assert answer.text == "Mel: I painted a lake yesterday!" and answer.citations == (1,)


def test_the_generator_client_keeps_no_replies(generator, llm_server, cache_dir):
    """Answers are cached once, as the case runner's stage records: its client does not store them too."""
    first = generator.answer(Q, CTX)
    again = generator.answer(Q, CTX)
    assert llm_server.count == 2 and again.text == first.text and not again.usage.cached
    assert not cache_dir.exists()


def test_unknown_prompt_fails_at_construction(llm_server, cache_dir):
    with pytest.raises(ConfigError, match="no answer prompt named"):
        LLMGenerator(model="openai/m", api_base=llm_server.url, prompt="missing")


def test_identity_changes_with_what_shapes_the_answer(llm_server, cache_dir):
    def ident(**kw):
        args = {"model": "openai/m", "api_base": llm_server.url, **kw}
        return LLMGenerator(**args).identity

    base = ident()
    variants = {
        ident(temperature=0.5),
        ident(max_tokens=9),
        ident(dataset="qasper"),
        ident(model="openai/n"),
        ident(api_base=llm_server.url + "/"),
    }
    assert base not in variants and len(variants) == 5
    assert ident(timeout=3, num_retries=0, max_concurrency=2) == base  # how it runs, not what it answers
