"""What the generator reads of a conversation's earlier turns (``generate.history``; docs/conversations.md).

- ``reference``: the earlier turns with the data's reference answers (the benchmarks' "gold history");
- ``own``: the earlier turns with this job's own answers to them. The generate wave then runs in rounds,
  one per turn position (``rounds``): a conversation's turn is generated after its earlier turns, and a
  round's answers are still batched together (a provider batch, a local model's batches). An earlier turn
  that failed, or that the job did not run (a sampled dataset), gives its message without an answer;
- ``none``: no history.

The last ``history_turns`` turns are kept, then the oldest of them are dropped while their text is over
``history_max_tokens`` (counted as words and punctuation marks, ``count_tokens``: close to a subword
tokenizer's count for English, without loading one). A history that still does not fit a local model's
window follows ``llm.context_overflow`` (``ragbench.generate.local``). The history shapes the answer, so it
is part of the answer's cache key (``ragbench.cache.keys.answer_key``).
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragbench.errors import ConfigError
from ragbench.types import Query, Turn
from ragbench.validate import integer

MODES = ("reference", "own", "none")
_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Words and punctuation marks of ``text``: the history cap's token count."""
    return len(_TOKEN.findall(text))


def _tokens(turn: Turn) -> int:
    return count_tokens(turn.text) + count_tokens(turn.answer or "")


@dataclass(frozen=True)
class HistoryPolicy:
    """``generate.history``, ``generate.history_turns`` and ``generate.history_max_tokens``."""

    mode: str = "reference"
    turns: int = 3
    max_tokens: int = 1000

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"generate.history={self.mode!r} is not valid; choose one of {list(MODES)}")
        integer("generate.history_turns", self.turns, lo=0, default=3)
        integer("generate.history_max_tokens", self.max_tokens, lo=1, default=1000)

    @property
    def own(self) -> bool:
        return self.mode == "own"

    def for_generation(self, query: Query, own: Mapping[str, str | None] | None = None) -> Query:
        """``query`` with the history its answer is generated from (``own``: this job's answers by qid)."""
        if not query.history:
            return query
        if self.mode == "none" or self.turns == 0:
            return dataclasses.replace(query, history=())
        kept = list(query.history[-self.turns:])
        if self.own:
            answers = own or {}
            kept = [dataclasses.replace(t, answer=answers.get(t.qid)) for t in kept]
        while kept and sum(map(_tokens, kept)) > self.max_tokens:
            kept.pop(0)  # the oldest first
        return dataclasses.replace(query, history=tuple(kept))

    def params(self) -> dict[str, Any]:
        return {"generate/history": self.mode, "generate/history_turns": self.turns,
                "generate/history_max_tokens": self.max_tokens}


def history_policy(node: Mapping[str, Any] | None) -> HistoryPolicy:
    """The policy of the config's ``generate`` node (absent: the defaults)."""
    node = node or {}
    unknown = sorted(set(map(str, node)) - {"history", "history_turns", "history_max_tokens"})
    if unknown:
        raise ConfigError(f"generate.{unknown[0]} is not a setting; the generate node takes history, "
                          "history_turns and history_max_tokens")
    return HistoryPolicy(mode=str(node.get("history", "reference")), turns=node.get("history_turns", 3),
                         max_tokens=node.get("history_max_tokens", 1000))


def rounds(policy: HistoryPolicy, queries: Sequence[Query]) -> list[list[int]]:
    """The generate wave's rounds, as indexes into ``queries``: one round, except under ``own``, where round
    r holds each conversation's r-th turn (in turn order) and every question that is no turn is in round 0."""
    if not policy.own or not any(q.conversation is not None for q in queries):
        return [list(range(len(queries)))]
    by_conv: dict[str, list[int]] = defaultdict(list)
    out: list[list[int]] = [[]]
    for i, q in enumerate(queries):
        if q.conversation is None:
            out[0].append(i)
        else:
            by_conv[q.conversation].append(i)
    for idx in by_conv.values():
        for position, i in enumerate(sorted(idx, key=lambda i: queries[i].turn)):
            while len(out) <= position:
                out.append([])
            out[position].append(i)
    return [sorted(r) for r in out if r]
