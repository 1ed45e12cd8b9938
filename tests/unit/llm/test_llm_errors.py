"""Mapping of provider failures to ragbench error classes, and key redaction."""

from __future__ import annotations

import httpx
import openai
import pytest

from ragbench.errors import LLMError, RagbenchError
from ragbench.llm.errors import (
    LLMAuthError,
    LLMConnectionError,
    LLMRateLimitError,
    LLMRequestError,
    LLMServerError,
    LLMTimeoutError,
    classify,
    fix_for,
)
from ragbench.redact import mask_secrets, register

REQ = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")


def _status(cls, code):
    return cls("boom", response=httpx.Response(code, request=REQ), body=None)


@pytest.mark.parametrize(
    "exc,expected,retryable",
    [
        (lambda: _status(openai.RateLimitError, 429), LLMRateLimitError, True),
        (lambda: _status(openai.InternalServerError, 500), LLMServerError, True),
        (lambda: _status(openai.APIStatusError, 503), LLMServerError, True),
        (lambda: _status(openai.APIStatusError, 408), LLMServerError, True),
        (lambda: openai.APITimeoutError(request=REQ), LLMTimeoutError, True),
        (lambda: openai.APIConnectionError(request=REQ), LLMConnectionError, True),
        (lambda: _status(openai.AuthenticationError, 401), LLMAuthError, False),
        (lambda: _status(openai.PermissionDeniedError, 403), LLMAuthError, False),
        (lambda: _status(openai.BadRequestError, 400), LLMRequestError, False),
        (lambda: _status(openai.NotFoundError, 404), LLMRequestError, False),
    ],
)
def test_classify(exc, expected, retryable):
    assert classify(exc()) == (expected, retryable)


def test_classes_are_ragbench_llm_errors_with_a_fix():
    for cls in (
        LLMRateLimitError,
        LLMServerError,
        LLMTimeoutError,
        LLMConnectionError,
        LLMAuthError,
        LLMRequestError,
    ):
        assert issubclass(cls, LLMError) and issubclass(cls, RagbenchError)
        assert "llm." in fix_for(cls)


def test_reply_sink_masks_every_occurrence_of_a_registered_key():
    # the rule the LLM reply sink uses: ragbench.redact's registered secrets, the reply's wording kept
    register("sk-abc123-errors-test")
    assert mask_secrets("key sk-abc123-errors-test and sk-abc123-errors-test") == "key *** and ***"
    assert mask_secrets("token: abc and nothing else") == "token: abc and nothing else"
    register(None)
    register("ab")  # a too-short secret is not a key: leave text alone
    assert mask_secrets("a b ab") == "a b ab"
