"""LLM failure classes (one per cause, so a failed case names it) and the retryable/permanent split."""

from __future__ import annotations

from collections.abc import Mapping

from ragbench.errors import LLMError


class LLMRateLimitError(LLMError):
    """The provider kept answering 429 (rate or quota limit) through every retry."""


class LLMTimeoutError(LLMError):
    """Every attempt outlived ``timeout`` seconds."""


class LLMConnectionError(LLMError):
    """The endpoint could not be reached (refused, DNS, reset)."""


class LLMServerError(LLMError):
    """The provider kept answering 5xx through every retry."""


class LLMAuthError(LLMError):
    """The provider refused the credentials (401/403)."""


class LLMRequestError(LLMError):
    """The provider rejected the request itself (400/404/422: bad model name, context too long)."""


class LLMResponseError(LLMError):
    """The provider answered 200 with something that is not a usable completion or embedding."""


class LLMReplyTooLargeError(LLMResponseError):
    """A reply longer than ``max_reply_chars``: refused (not stored, not judged), the case fails."""


class LLMCircuitOpenError(LLMError):
    """``max_consecutive_failures`` calls in a row could not connect or authenticate: the endpoint is
    down or the key is wrong, so every later call fails at once and the job ends FAILED."""


_FIXES: Mapping[type[LLMError], str] = {
    LLMRateLimitError: "lower llm.max_concurrency, raise llm.num_retries / llm.backoff_s, or check the quota",
    LLMTimeoutError: "raise llm.timeout, lower llm.max_tokens, or check that the server is not overloaded",
    LLMConnectionError: "check llm.api_base and that the server is running and reachable",
    LLMServerError: "retry later or raise llm.num_retries; the provider is failing",
    LLMAuthError: "export a valid key in the environment variable named by llm.api_key_env",
    LLMRequestError: "check llm.model (provider/model as litellm names it) and the prompt length",
    LLMResponseError: "check that llm.api_base serves the OpenAI-compatible API the model string implies",
    LLMReplyTooLargeError: "lower llm.max_tokens, or raise llm.max_reply_chars if such long replies are meant",
}

# Failures that say the endpoint or the credentials are wrong, not this one request: counted by the
# circuit breaker (``max_consecutive_failures``) and reported once.
ENDPOINT_FAILURES: tuple[type[LLMError], ...] = (LLMConnectionError, LLMAuthError)


def fix_for(cls: type[LLMError]) -> str:
    """The user-facing fix for one failure class."""
    return _FIXES.get(cls, "see the error above")


def classify(exc: BaseException) -> tuple[type[LLMError], bool]:
    """(ragbench class, retryable?) for an exception raised by litellm (they subclass openai's)."""
    import openai  # litellm depends on it; imported here to keep module import cheap

    # litellm wraps a refused connection in an InternalServerError "500": the cause chain tells.
    link: BaseException | None = exc
    for _ in range(8):
        if link is None:
            break
        if isinstance(link, openai.APITimeoutError):
            return LLMTimeoutError, True
        if isinstance(link, openai.APIConnectionError):
            return LLMConnectionError, True
        link = link.__cause__ or link.__context__
    status = getattr(exc, "status_code", None)
    if isinstance(exc, openai.RateLimitError) or status == 429:
        return LLMRateLimitError, True
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError) or status in (401, 403):
        return LLMAuthError, False
    if isinstance(status, int) and (status >= 500 or status in (408, 409)):
        return LLMServerError, True
    if isinstance(exc, openai.InternalServerError):
        return LLMServerError, True
    return LLMRequestError, False
