"""``query=decompose``: a question split into sub-questions, each retrieved as one hop, the hops' rankings
merged by RRF or interleaved (``query.merge=rrf|interleave``, ``ragbench.query.plan``).

Two decomposers (``query.decomposer``): ``llm`` asks a model (any backend, the local one included:
``query.transform.client.model=local``) for the sub-questions; ``rules`` splits the question on its
conjunctions and comparisons (no LLM, deterministic: the baseline). A question that does not split is
its own single hop. An LLM failure for one question keeps the question alone and is counted
(``query/transform_failures``), as the other LLM transforms do; a budget stop stops the job.

The sub-questions are each case's hops (``trace.hops`` of its record, ``ragbench.judge.hops``).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from hydra.utils import instantiate
from omegaconf import DictConfig

from ragbench.errors import BudgetExhaustedError, ConfigError, JobStopped, RagbenchError
from ragbench.llm.endpoint import LLMEndpoint
from ragbench.query.transforms import LLMTransform
from ragbench.types import Query
from ragbench.validate import integer

log = logging.getLogger(__name__)
DECOMPOSERS = ("llm", "rules")
MERGES = ("rrf", "interleave")
DECOMPOSE_PROMPT = (
    "Split the question below into at most {n} simpler sub-questions, each answerable from a single "
    "passage, that together answer it. If the question asks for one fact only, repeat it unchanged. "
    "One sub-question per line, no numbering, nothing else.\n\nQuestion: {question}"
)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)]|(?:sub-?question|q)\s*\d*[:.)])\s*", re.IGNORECASE)
# a comparison: "<head> <X> or <Y>?" after a comma or colon ("Who is older, Ann or Bob?")
_CHOICE = re.compile(r"^(?P<head>.+?)[,:]\s*(?P<a>[^,]+?)\s+or\s+(?P<b>[^,]+?)\s*\?*$", re.IGNORECASE)
# clause boundaries a multi-part question joins its parts at
_QWORDS = ("what|which|who|whom|whose|when|where|why|how|does|do|did|is|are|was|were|has|have|had|can|could|"
           "would|should|will")
_JOINS = re.compile(
    rf",?\s+(?:and\s+(?:also\s+)?(?=(?:{_QWORDS})\b)|"
    r"(?:while|whereas|but|as\s+well\s+as|compared\s+(?:to|with)|than|versus|vs\.?)\s+)|;\s*|\?\s+(?=\S)",
    re.IGNORECASE)
_QWORD = re.compile(rf"^(?:{_QWORDS})\b", re.IGNORECASE)
# a yes/no question's auxiliary: the parts of "Did A say X while B said Y?" each ask with it
_AUX = re.compile(r"^(does|do|did|is|are|was|were|has|have|had|can|could|would|should|will)\b", re.IGNORECASE)
MIN_WORDS = 3  # a shorter part joins the part before it


@runtime_checkable
class HopTransform(Protocol):
    """A query transform whose variants are a question's hops: merged by ``merge``; ``spent(qid)`` is the
    LLM tokens it spent on that question."""

    merge: str

    def spent(self, qid: str) -> int: ...


def split_rules(question: str, n: int = 4) -> tuple[str, ...]:
    """The rules decomposer: at most ``n`` sub-questions, split at the question's conjunctions ("..., and
    who ...", "while", "whereas", "but") and comparisons ("than", "compared to", "<head>, X or Y?");
    the question itself when it does not split."""
    text = " ".join(question.split())
    choice = _CHOICE.match(text)
    if choice and len(choice.group("head").split()) >= 2:
        head = choice.group("head").strip()
        parts = [f"{head} {choice.group('a').strip()}?", f"{head} {choice.group('b').strip()}?"]
    else:
        parts = []
        for raw in _JOINS.split(text):
            part = raw.strip(" ,;")
            if not part:
                continue
            if parts and len(part.split()) < MIN_WORDS:
                parts[-1] = f"{parts[-1]} {part}"
            else:
                parts.append(part)
        lead = _AUX.match(text)
        if lead and len(parts) > 1:  # "Did A say X while B said Y?": every part asks as the question does
            parts = [p if _QWORD.match(p) else f"{lead.group(1)} {p}" for p in parts]
    parts = [p if p.endswith("?") else f"{p.rstrip('.')}?" for p in parts]
    parts = list(dict.fromkeys(p for p in parts if len(p.split()) >= MIN_WORDS))
    return tuple(parts[:n]) if len(parts) > 1 else (question,)


def parse_subquestions(question: str, reply: str, n: int) -> tuple[str, ...]:
    """The reply's first ``n`` distinct non-empty lines (bullets, numbers and labels removed); the question
    itself when there are none."""
    out: list[str] = []
    for line in reply.splitlines():
        text = " ".join(_BULLET.sub("", line).split()).strip("\"'")
        if text and all(text.lower() != seen.lower() for seen in out):
            out.append(text)
        if len(out) >= n:
            break
    return tuple(out) or (question,)


def decomposer(*, decomposer: str = "llm", merge: str = "rrf", n: int = 4,
               client: Any = None) -> RuleDecompose | LLMDecompose:
    """``query=decompose``'s transform for ``query.decomposer``: the model is built for ``llm`` only."""
    if merge not in MERGES:
        raise ConfigError(f"query.merge={merge!r} is not known; use one of {list(MERGES)}")
    n = integer("query.transform.n", n, lo=1, hi=16, default=4)
    if decomposer == "rules":
        return RuleDecompose(merge=merge, n=n)
    if decomposer != "llm":
        raise ConfigError(f"query.decomposer={decomposer!r} is not known; use one of {list(DECOMPOSERS)}")
    if client is None:
        raise ConfigError("query.decomposer=llm needs query.transform.client (see conf/query/decompose.yaml)")
    return LLMDecompose(client=_built(client), merge=merge, n=n)


class RuleDecompose:
    """``query=decompose query.decomposer=rules``: split at conjunctions and comparisons, no LLM."""

    name = "decompose"
    lexical_ok = True
    failures = 0
    max_concurrency = 1

    def __init__(self, *, merge: str = "rrf", n: int = 4) -> None:
        self.merge = merge
        self.n = n

    def variants(self, query: Query) -> tuple[str, ...]:
        return split_rules(query.text, self.n)

    def spent(self, qid: str) -> int:
        return 0

    def params(self) -> Mapping[str, Any]:
        return {"query/transform": self.name, "query/decomposer": "rules", "query/merge": self.merge,
                "query/n": self.n}


class LLMDecompose(LLMTransform):
    """``query=decompose`` (``query.decomposer=llm``): a model writes the sub-questions, each a hop."""

    name = "decompose"
    lexical_ok = True
    prompt = DECOMPOSE_PROMPT

    def __init__(self, *, client: LLMEndpoint | Any, merge: str = "rrf", n: int = 4) -> None:
        super().__init__(client=client)
        self.merge = merge
        self.n = n
        self._spent: dict[str, int] = {}
        self._lock = threading.Lock()

    def fields(self) -> Mapping[str, Any]:
        return {"n": self.n}

    def variants(self, query: Query) -> tuple[str, ...]:
        try:
            reply = self.client.complete(self.messages(query.text))
        except BudgetExhaustedError as exc:  # the job stops (KILLED), as in the other LLM transforms
            raise JobStopped(f"stopped by budget while decomposing questions (query={self.name}): {exc}; fix: "
                             "raise the budget and rerun (the decompositions paid for are cached)") from None
        except Exception as exc:  # noqa: BLE001 - one question keeps its text, counted and logged
            with self._lock:
                self.failures += 1
            log.warning("query=decompose: the LLM failed for a question (%s); searching the question alone",
                        type(exc).__name__)
            return (query.text,)
        with self._lock:
            self._spent[query.qid] = reply.usage.prompt_tokens + reply.usage.completion_tokens
        return parse_subquestions(query.text, reply.text, self.n)

    def spent(self, qid: str) -> int:
        with self._lock:
            return self._spent.get(qid, 0)

    def params(self) -> Mapping[str, Any]:
        return {**super().params(), "query/decomposer": "llm", "query/merge": self.merge, "query/n": self.n}


def _built(node: Any) -> Any:
    """The client node as an object: the config's (not instantiated with the transform, ``_recursive_:
    false``) built here, its own RagbenchError surfaced as it is."""
    if not isinstance(node, DictConfig):
        return node
    try:
        return instantiate(node)
    except RagbenchError:
        raise
    except Exception as exc:
        if isinstance(exc.__cause__, RagbenchError):
            raise exc.__cause__ from None
        raise ConfigError(f"query.transform.client cannot be built: {exc}") from exc
