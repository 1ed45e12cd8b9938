"""Query transformations: the texts searched for one question (``query=none|rules|multi_query|hyde``).

Each transform maps a question to its *variants*: the texts retrieved separately and fused back into
one ranking (``ragbench.query.plan``). ``none`` searches the question; ``rules`` adds EasyRAG's
deterministic sub-queries (``ragbench.query.rules``); ``multi_query`` asks an LLM for ``n`` more
phrasings (its own model key, replies cached by the LLM client like answers); ``hyde`` searches a
hypothetical answer passage written by an LLM instead of the question (dense retrievers only).
An LLM failure for one question keeps the question alone and is counted (``query/transform_failures``).
A budget stop is not such a failure: it stops the job (``JobStopped``, the run ends KILLED), so no
question is searched unrewritten and a rerun with a larger budget runs the job again.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ragbench.errors import BudgetExhaustedError, ConfigError, JobStopped
from ragbench.llm.endpoint import LLMEndpoint
from ragbench.protocols import FusedRetriever, QueryTransform, Retriever
from ragbench.query.rules import RULES, expand
from ragbench.types import Query
from ragbench.validate import integer

log = logging.getLogger(__name__)

MULTI_QUERY_PROMPT = (
    "Write {n} different search queries that would find the passages answering the question below. "
    "Vary the wording and name the key entities. One query per line, no numbering, nothing else.\n\n"
    "Question: {question}"
)
HYDE_PROMPT = (
    "Write a short passage (2-3 sentences) that answers the question below as a source document would. "
    "Write only the passage.\n\nQuestion: {question}"
)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)]|q\d+[:.)])\s*", re.IGNORECASE)


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


class NoQueryTransform:
    """``query=none``: the question is searched as written."""

    name = "none"
    lexical_ok = True
    failures = 0
    max_concurrency = 1

    def variants(self, query: Query) -> tuple[str, ...]:
        return (query.text,)

    def params(self) -> Mapping[str, Any]:
        return {"query/transform": self.name}


class RuleExpansion:
    """``query=rules``: the question plus EasyRAG-style rule sub-queries (no LLM, deterministic)."""

    name = "rules"
    lexical_ok = True
    failures = 0
    max_concurrency = 1

    def __init__(self, *, rules: Sequence[str] = RULES) -> None:
        unknown = [r for r in rules if r not in RULES]
        if unknown or not rules:
            raise ConfigError(f"query.transform.rules={list(rules)} names unknown rules {unknown}; "
                              f"use a non-empty subset of {list(RULES)}")
        self.rules = tuple(rules)

    def variants(self, query: Query) -> tuple[str, ...]:
        return expand(query.text, self.rules)

    def params(self) -> Mapping[str, Any]:
        return {"query/transform": self.name, "query/rules": ",".join(self.rules)}


class LLMTransform:
    """Shared by multi_query and hyde: one cached LLM call per question, a failure counted. The calls
    are booked in the ledger under the client's role (``query.transform.client``: ``llm/query_calls``)."""

    name = ""
    prompt = ""

    def __init__(self, *, client: LLMEndpoint | Any) -> None:
        """``client``: the endpoint of ``query.transform.client`` (or an LLM client made from one)."""
        self.client = client.client() if isinstance(client, LLMEndpoint) else client
        self.failures = 0
        self.max_concurrency = int(self.client.max_concurrency)  # an LLMClient (ragbench.llm.client)

    def fields(self) -> Mapping[str, Any]:
        """The prompt's fields besides the question."""
        return {}

    def messages(self, question: str) -> list[dict[str, str]]:
        """The chat messages sent for ``question`` (what ``plan=true`` prices and looks up)."""
        return [{"role": "user", "content": self.prompt.format(question=question, **self.fields())}]

    def _ask(self, question: str) -> str | None:
        try:
            reply = self.client.complete(self.messages(question))
        except BudgetExhaustedError as exc:  # the job stops (KILLED), as a stop in generation does
            raise JobStopped(f"stopped by budget while rewriting questions (query={self.name}): {exc}; no "
                             "question is searched unrewritten; fix: raise the budget and rerun (the "
                             "rewrites already paid for are cached)") from None
        except Exception as exc:  # noqa: BLE001 - one question keeps its text, counted and logged
            self.failures += 1
            log.warning("query=%s: the LLM failed for a question (%s); searching the question alone",
                        self.name, type(exc).__name__)
            return None
        return reply.text

    def preflight(self) -> None:
        """One tiny request before the first case (an endpoint that is down fails the job up front)."""
        self.client.preflight()

    def params(self) -> Mapping[str, Any]:
        return {"query/transform": self.name, "query/model": self.client.model,
                "query/prompt_hash": _hash(self.prompt)}


class MultiQuery(LLMTransform):
    """``query=multi_query``: the question plus up to ``n`` LLM-written sub-queries."""

    name = "multi_query"
    lexical_ok = True
    prompt = MULTI_QUERY_PROMPT

    def __init__(self, *, client: LLMEndpoint | Any, n: int = 3) -> None:
        n = integer("query.transform.n", n, lo=1, default=3)  # EasyRAG uses 3
        super().__init__(client=client)
        self.n = n

    def fields(self) -> Mapping[str, Any]:
        return {"n": self.n}

    def variants(self, query: Query) -> tuple[str, ...]:
        reply = self._ask(query.text)
        return parse_subqueries(query.text, reply or "", self.n)

    def params(self) -> Mapping[str, Any]:
        return {**super().params(), "query/n": self.n}


class HyDE(LLMTransform):
    """``query=hyde``: a hypothetical answer passage is embedded in place of the question."""

    name = "hyde"
    lexical_ok = False
    prompt = HYDE_PROMPT

    def variants(self, query: Query) -> tuple[str, ...]:
        reply = " ".join((self._ask(query.text) or "").split())
        return (reply or query.text,)


def parse_subqueries(question: str, reply: str, n: int) -> tuple[str, ...]:
    """The question, then the reply's first ``n`` distinct non-empty lines (bullets and numbers removed)."""
    out = [question]
    for line in reply.splitlines():
        text = " ".join(_BULLET.sub("", line).split()).strip("\"'")
        if text and all(text.lower() != seen.lower() for seen in out):
            out.append(text)
        if len(out) > n:
            break
    return tuple(out)


def check_transform(transform: QueryTransform, retriever: Retriever) -> None:
    """A one-line ConfigError when the transform cannot run with the retriever (hyde with BM25)."""
    children = retriever.children if isinstance(retriever, FusedRetriever) and retriever.children else [retriever]
    lexical = [type(c).__name__ for c in children if not c.needs_vectors]
    if not transform.lexical_ok and lexical:
        raise ConfigError(
            f"query={transform.name} embeds a hypothetical answer as the query, but the retriever has a lexical "
            f"part ({', '.join(lexical)}) that would search it as words; use retrieval=dense, or another query"
        )
