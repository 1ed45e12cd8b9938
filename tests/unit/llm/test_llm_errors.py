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
    redact,
)

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


def test_redact_masks_every_occurrence():
    assert redact("key sk-abc123 and sk-abc123", "sk-abc123") == "key *** and ***"
    assert redact("nothing", None) == "nothing"
    assert redact("a b", "a") == "a b"  # a too-short secret is not a key: leave text alone
