"""Refusal detection: does a text say the information is missing ("Not mentioned", "Unanswerable")?"""

from __future__ import annotations

from ragbench.metric_info import MetricInfo
from ragbench.text import normalize

METRICS = {
    # a flag, not a score: the job reports answer/refusal_accuracy and answer/false_refusal_rate from it
    "answer/refused": MetricInfo("1 when the answer is empty or a short missing-information phrase",
                                 "ragbench's refusal heuristic (REFUSAL_PHRASES)", kind="diagnostic"),
}

REFUSAL_PHRASES = (
    "not mentioned", "unanswerable", "unknown", "no information", "insufficient information",
    "no insufficient information", "not enough information", "cannot be determined", "can not be determined",
    "cannot be answered", "cannot answer", "can not answer", "does not mention", "do not mention",
    "not provided", "not specified", "not stated", "not available in", "i don t know", "no answer",
    "not in context", "none of contexts",
)
MAX_REFUSAL_TOKENS = 16


def is_refusal(text: str) -> bool:
    """True for an empty answer, or a short one that contains a missing-information phrase."""
    if not str(text).strip():
        return True
    norm = normalize(text)
    if not norm:  # "A+", "-": an answer made of an article or punctuation is not a refusal
        return False
    if len(norm.split()) > MAX_REFUSAL_TOKENS:
        return False
    return any(phrase in norm for phrase in REFUSAL_PHRASES)
