"""``query=contextualize``: each turn of a conversation rewritten into a standalone query from its history
(docs/conversations.md), as a swept query stage.

- ``method: rules`` (the default, no LLM): the last ``history_turns`` user messages, oldest first, then the
  turn itself, as one text (the baseline of history-aware retrieval: concatenate the last k turns);
- ``method: llm``: the LLM of ``query.transform.client`` (any backend; ``model: local`` runs in process)
  rewrites the turn from the last ``history_turns`` turns (the user's messages and the answers the data
  gives); its reply is searched alone;
- ``method: dataset``: the rewrite the data gives (MTRAG's human rewrites, ``meta["rewrite"]``), else the
  turn as written: the benchmark's "query rewrite" setting.

An LLM failure searches the turn as written and is counted (``query/transform_failures``); a budget stop
stops the job, as for ``query=multi_query``.

A question that is no turn, or a first turn, is searched as written; ``history_turns: 0`` searches every
turn as written (``query=none``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ragbench.errors import BudgetExhaustedError, ConfigError, JobStopped
from ragbench.llm.endpoint import LLMEndpoint
from ragbench.query.transforms import LLMTransform
from ragbench.types import Query, Turn
from ragbench.validate import integer

log = logging.getLogger(__name__)

METHODS = ("rules", "llm", "dataset")
CONTEXTUALIZE_PROMPT = (
    "Rewrite the user's last message in the conversation below as one standalone search query: replace "
    "pronouns and references to earlier turns by what they refer to, and name the key entities. Write only "
    "the query.\n\nConversation:\n{history}\n\nLast message: {question}"
)


def window(history: Sequence[Turn], turns: int) -> tuple[Turn, ...]:
    """The last ``turns`` turns of ``history`` (none for 0)."""
    return tuple(history[-turns:]) if turns > 0 else ()


class ContextualizeRules:
    """``query=contextualize`` with ``method: rules``: the last ``history_turns`` user messages and the turn."""

    name = "contextualize"
    lexical_ok = True
    failures = 0
    max_concurrency = 1

    def __init__(self, *, history_turns: int = 2) -> None:
        self.history_turns = integer("query.history_turns", history_turns, lo=0, default=2)

    def variants(self, query: Query) -> tuple[str, ...]:
        earlier = window(query.history, self.history_turns)
        return (" ".join([*(t.text.strip() for t in earlier), query.text.strip()]) if earlier else query.text,)

    def params(self) -> Mapping[str, Any]:
        return {"query/transform": self.name, "query/method": "rules", "query/history_turns": self.history_turns}


class DatasetRewrite:
    """``query=contextualize`` with ``method: dataset``: the data's own standalone rewrite of each turn."""

    name = "contextualize"
    lexical_ok = True
    failures = 0
    max_concurrency = 1

    def variants(self, query: Query) -> tuple[str, ...]:
        rewrite = query.meta.get("rewrite")
        return (str(rewrite),) if isinstance(rewrite, str) and rewrite.strip() else (query.text,)

    def params(self) -> Mapping[str, Any]:
        return {"query/transform": self.name, "query/method": "dataset"}


class ContextualizeLLM(LLMTransform):
    """``query=contextualize`` with ``method: llm``: the LLM's standalone rewrite of the turn."""

    name = "contextualize"
    lexical_ok = True
    prompt = CONTEXTUALIZE_PROMPT

    def __init__(self, *, client: LLMEndpoint | Any, history_turns: int = 2) -> None:
        turns = integer("query.history_turns", history_turns, lo=0, default=2)
        super().__init__(client=client)
        self.history_turns = turns

    def conversation(self, history: Sequence[Turn]) -> str:
        lines = []
        for t in window(history, self.history_turns):
            lines.append(f"User: {t.text.strip()}")
            if t.answer:
                lines.append(f"Assistant: {t.answer.strip()}")
        return "\n".join(lines)

    def messages(self, question: str, history: Sequence[Turn] = ()) -> list[dict[str, str]]:
        """The chat messages sent for a turn (``history``: its earlier turns)."""
        text = self.prompt.format(question=question, history=self.conversation(history) or "(none)")
        return [{"role": "user", "content": text}]

    def variants(self, query: Query) -> tuple[str, ...]:
        if not window(query.history, self.history_turns):
            return (query.text,)
        try:
            reply = self.client.complete(self.messages(query.text, query.history))
        except BudgetExhaustedError as exc:  # the job stops (KILLED), as LLMTransform._ask
            raise JobStopped(f"stopped by budget while rewriting questions (query={self.name}): {exc}; no "
                             "question is searched unrewritten; fix: raise the budget and rerun (the "
                             "rewrites already paid for are cached)") from None
        except Exception as exc:  # noqa: BLE001 - one turn keeps its text, counted and logged
            self.failures += 1
            log.warning("query=%s: the LLM failed for a turn (%s); searching the turn as written",
                        self.name, type(exc).__name__)
            return (query.text,)
        text = " ".join(reply.text.split()).strip("\"'")
        return (text or query.text,)

    def params(self) -> Mapping[str, Any]:
        return {**super().params(), "query/method": "llm", "query/history_turns": self.history_turns}


def contextualizer(*, method: str = "rules", history_turns: int = 2,
                   client: DictConfig | Mapping[str, Any] | LLMEndpoint | None = None,
                   ) -> ContextualizeRules | ContextualizeLLM | DatasetRewrite:
    """The transform of ``query=contextualize`` (the config's ``_target_``, built with ``_recursive_: false``
    so that ``method: rules`` never builds the LLM endpoint, whose key it does not need)."""
    if method not in METHODS:
        raise ConfigError(f"query.transform.method={method!r} is not valid; choose one of {list(METHODS)}")
    if method == "rules":
        return ContextualizeRules(history_turns=history_turns)
    if method == "dataset":
        return DatasetRewrite()
    if client is None:
        raise ConfigError("query=contextualize with method=llm needs query.transform.client (its model and api_base)")
    if not isinstance(client, LLMEndpoint):
        node = OmegaConf.to_container(client, resolve=True) if isinstance(client, DictConfig) else dict(client)
        assert isinstance(node, dict)
        settings = {str(k): v for k, v in node.items() if k not in ("_target_", "role")}
        client = LLMEndpoint.of(str(node.get("role") or "query.transform.client"), None, settings)
    return ContextualizeLLM(client=client, history_turns=history_turns)
