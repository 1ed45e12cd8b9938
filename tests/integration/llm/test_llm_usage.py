"""Usage and cost from a litellm response (offline cost map), and the cached-usage round trip."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from ragbench.llm.usage import cost_usd, max_cost_usd, usage_from_cache, usage_of, usage_to_dict
from ragbench.types import Usage


def _response(model: str, prompt: int, completion: int):
    import litellm

    return litellm.ModelResponse(
        model=model,
        choices=[{"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}],
        usage={"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    )


def test_cost_of_a_priced_model_by_hand():
    # gpt-4o-mini in litellm's bundled map: $0.15 per 1M input tokens, $0.60 per 1M output tokens
    usage = usage_of(_response("gpt-4o-mini", 1000, 100), model="openai/gpt-4o-mini")
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached) == (1000, 100, False)
    assert usage.cost_usd == pytest.approx(1000 * 0.15e-6 + 100 * 0.60e-6)


def test_unpriced_model_costs_zero_and_warns_once(caplog):
    with caplog.at_level(logging.WARNING):
        assert cost_usd(_response("my-local-model-xyz", 10, 2), model="openai/my-local-model-xyz") == 0.0
        assert cost_usd(_response("my-local-model-xyz", 10, 2), model="openai/my-local-model-xyz") == 0.0
    assert caplog.text.count("no price for model 'openai/my-local-model-xyz'") == 1


def test_missing_usage_counts_zero_tokens():
    usage = usage_of(SimpleNamespace(usage=None), model="openai/my-local-model-xyz")
    assert (usage.prompt_tokens, usage.completion_tokens) == (0, 0)


def test_cache_round_trip_marks_cached_and_keeps_the_original_figures():
    original = Usage(prompt_tokens=12, completion_tokens=3, cost_usd=0.5)
    back = usage_from_cache({"text": "t", **usage_to_dict(original)})
    assert back == Usage(prompt_tokens=12, completion_tokens=3, cost_usd=0.5, cached=True)


def test_max_cost_of_a_request_is_its_prompt_and_max_tokens_priced():
    # what budget.max_usd reserves before sending: tiktoken counts 5 words + 7 tokens of chat framing = 12
    messages = [{"role": "user", "content": "hello there how are you"}]
    assert max_cost_usd(model="openai/gpt-4o-mini", messages=messages, max_tokens=100) == pytest.approx(
        12 * 0.15e-6 + 100 * 0.60e-6)
    # no max_tokens: the model's largest reply (gpt-4o-mini: 16,384 output tokens)
    assert max_cost_usd(model="openai/gpt-4o-mini", messages=messages) == pytest.approx(
        12 * 0.15e-6 + 16384 * 0.60e-6)
    # an embedding request: input tokens only, text-embedding-3-small at $0.02 per 1M
    assert max_cost_usd(model="openai/text-embedding-3-small", texts=["hello there how are you"] * 2) == \
        pytest.approx(10 * 0.02e-6)
    assert max_cost_usd(model="openai/my-local-model-xyz", messages=messages, max_tokens=100) == 0.0  # unpriced
