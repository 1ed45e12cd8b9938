"""Question classifiers for routing (``routing.by=rules|llm``, ``ragbench.routing``): each question gets one
class of ``ragbench.routing.CLASSES``, and ``routing.routes.<class>`` its route.

- ``rules`` (no LLM, deterministic: the baseline): ``decompose`` when the question joins or compares parts
  (it splits under ``ragbench.query.decompose.split_rules``, or a yes/no or "between" question holds a
  comparison or a before/after); ``iterative`` when a wh-question reaches its answer through a bridge (a
  relative clause on a noun: "the shipyard that ...", "the striker who ...", or an appositive
  participle: "Which company, reported by ..."): one fact names what to search next; else ``single``.
- ``llm``: a model (any backend, the local one with ``RAGBENCH_QUERY_MODEL=local``) is asked for one
  label; replies are cached by the LLM client like query rewrites. A failed request or a reply that
  names no class is routed ``single`` and counted (``routing/fallback``); a budget stop stops the job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragbench.errors import BudgetExhaustedError, JobStopped
from ragbench.query.decompose import split_rules
from ragbench.routing import CLASSES

FALLBACK = "single"  # the class of an LLM failure or an unknown reply
CLASSIFY_PROMPT = (
    "Decide how the question below should be searched in a document collection. Reply with exactly one "
    "label and nothing else:\n"
    "single - one search can find the answer;\n"
    "decompose - it compares or combines separate facts (a comparison, before/after, two reports) that can "
    "each be searched alone;\n"
    "iterative - one fact must be found first to know what to search next (a bridge).\n\n"
    "Question: {question}\nLabel:"
)
_AUX_OR_BETWEEN = re.compile(r"^(?:does|do|did|is|are|was|were|has|have|had|can|could|would|will|between)\b",
                             re.IGNORECASE)
_COMPARE = re.compile(r"\b(?:than|before|after|earlier|later|compared|versus|same|different|both|more|less|"
                      r"larger|smaller|higher|lower|first)\b", re.IGNORECASE)
_WH = re.compile(r"^(?:what|which|who|whom|whose|where|when|how)\b", re.IGNORECASE)
# a noun with a relative clause ("the shipyard that", "the striker who") or an appositive participle
# after a wh-word's noun ("Which company, reported by ...")
_BRIDGE = re.compile(
    r"\b(?:the|a|an)\s+(?:[\w'-]+\s+){0,3}?[\w'-]+,?\s+(?:that|who|whom|whose|which)\b"
    r"|^(?:which|what)\s+[\w'-]+,\s+[\w'-]+(?:ed|en)\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z]+")


def classify_rules(question: str) -> str:
    """The rules classifier's class for ``question`` (see the module docstring)."""
    text = " ".join(question.split())
    if len(split_rules(text)) > 1:
        return "decompose"
    if _AUX_OR_BETWEEN.match(text) and _COMPARE.search(text):
        return "decompose"
    if _WH.match(text) and _BRIDGE.search(text):
        return "iterative"
    return "single"


def parse_label(reply: str, allowed: tuple[str, ...] = CLASSES) -> str | None:
    """The class a reply names: its first word among ``allowed`` (case, quotes, punctuation ignored), else
    the one allowed class the reply's first line holds; None when it names none (or several)."""
    lines = [line for line in reply.strip().splitlines() if line.strip()]
    if not lines:
        return None
    words = _WORD.findall(lines[0].lower())
    if words and words[0] in allowed:
        return words[0]
    named = {w for w in words if w in allowed}
    return named.pop() if len(named) == 1 else None


@dataclass(frozen=True)
class Prediction:
    """A question's class, how it was found and what it cost: ``fallback`` when the classifier could not
    tell (an LLM failure, an unknown reply) and ``single`` was used."""

    cls: str
    reply: str = ""
    error: str = ""
    tokens: int = 0
    fallback: bool = False


class RulesClassifier:
    """``routing.by=rules``: ``classify_rules``, no LLM."""

    name = "rules"
    max_concurrency = 1

    def classify(self, question: str) -> Prediction:
        return Prediction(classify_rules(question))


class LLMClassifier:
    """``routing.by=llm``: the model of ``routing.client`` names one class (cached like query rewrites)."""

    name = "llm"

    def __init__(self, client: object) -> None:
        self.client = client  # an LLMClient (ragbench.llm.client)
        self.max_concurrency = int(getattr(client, "max_concurrency", 1) or 1)

    def classify(self, question: str) -> Prediction:
        try:
            reply = self.client.complete(  # type: ignore[attr-defined]
                [{"role": "user", "content": CLASSIFY_PROMPT.format(question=question)}])
        except BudgetExhaustedError as exc:
            raise JobStopped(f"stopped by budget while routing questions (routing.by=llm): {exc}; fix: raise the "
                             "budget and rerun (the classifications paid for are cached)") from None
        except Exception as exc:  # noqa: BLE001 - the question is routed single, counted and recorded
            return Prediction(FALLBACK, error=f"{type(exc).__name__}: {exc}"[:200], fallback=True)
        tokens = reply.usage.prompt_tokens + reply.usage.completion_tokens
        label = parse_label(reply.text)
        return Prediction(label or FALLBACK, reply=reply.text.strip()[:40], tokens=tokens, fallback=label is None)
