"""Conversations in the custom QA file: a line with a ``turns`` list is one conversation, and each turn
becomes one question (docs/conversations.md).

A turn is a question line of its own (``question``, ``answers``, ``evidence``, ``doc_ids``,
``question_type``, ``answerable``) plus optional ``turn`` (its 1-based index, checked: turns are listed in
order) and ``tags`` (an object of strings; ``followup`` marks a follow-up for the ``by_followup/*`` groups; a
list of strings is free labels, as on a question line: ``by_tag/*``). Its question
id is ``<conversation id>#<turn>``, stable across runs, so ``compare`` pairs the turns of two runs; the
earlier turns, oldest first, are its history (each with its first reference answer).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ragbench.errors import DatasetError
from ragbench.types import Turn

SEPARATOR = "#"  # <conversation id>#<turn index>


def turn_qid(conversation: str, turn: int) -> str:
    """The question id of a conversation's turn: ``<conversation>#<turn>``."""
    return f"{conversation}{SEPARATOR}{turn}"


def _tags(value: Any, *, dataset: str, file: str, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str | int | float | bool) for v in value.values()):
        raise DatasetError("a turn's tags must be an object of strings", dataset=dataset, file=file, record=where,
                           field="tags", fix='write "tags": {"followup": "clarification"}, or leave it out')
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}


def parse_conversation(row: dict[str, Any], line: int, seen: dict[str, int], parse_row: Callable[..., Any], *,
                       dataset: str, file: str) -> list[Any]:
    """The questions of one conversation line (``parse_row`` reads each turn as a question line);
    ``seen`` maps the conversation ids read so far to their lines (a reused id is an error)."""
    where = f"line {line}"
    conv = str(row["id"]) if row.get("id") not in (None, "") else f"c{line}"
    if SEPARATOR in conv:
        raise DatasetError(f"the conversation id {conv!r} holds {SEPARATOR!r}, which separates it from the turn "
                           "number in the turns' ids", dataset=dataset, file=file, record=where, field="id",
                           fix=f"give the conversation an id without {SEPARATOR!r}")
    if conv in seen:
        raise DatasetError(f"the conversation id {conv!r} is used again (first on line {seen[conv]})",
                           dataset=dataset, file=file, record=where, field="id",
                           fix="give every conversation its own id (one line per conversation, all its turns in "
                           "its turns list)")
    seen[conv] = line
    turns = row["turns"]
    if not isinstance(turns, list) or not turns:
        raise DatasetError("turns must be a non-empty list of turns", dataset=dataset, file=file, record=where,
                           field="turns", fix='write "turns": [{"question": "..."}, {"question": "..."}]')
    out: list[Any] = []
    history: list[Turn] = []
    for index, turn in enumerate(turns, start=1):
        twhere = f"{where} (conversation {conv!r}) turn {index}"
        if not isinstance(turn, dict):
            raise DatasetError(f"a turn must be a JSON object, found {type(turn).__name__}", dataset=dataset,
                               file=file, record=twhere, field="turns", fix='write the turn as {"question": "..."}')
        if not isinstance(turn.get("question"), str) or not turn["question"].strip():
            raise DatasetError("the turn has no message", dataset=dataset, file=file, record=twhere,
                               field="question", fix='write the user\'s message as "question": "..."')
        given = turn.get("turn")
        if given is not None and (isinstance(given, bool) or given != index):
            raise DatasetError(f"turns out of order: turn {given!r} is listed at place {index}", dataset=dataset,
                               file=file, record=twhere, field="turn",
                               fix="list the turns in order (1, 2, 3, ...), or leave out their turn numbers")
        tags: dict[str, str] = {}
        if not isinstance(turn.get("tags"), list):  # a list: free labels (by_tag/*), read as on a question line
            tags = _tags(turn.get("tags"), dataset=dataset, file=file, where=twhere)
            turn = {k: v for k, v in turn.items() if k != "tags"}
        parsed = parse_row(turn, twhere, turn_qid(conv, index), dataset=dataset, file=file)
        out.append(dataclasses.replace(parsed, conversation=conv, turn=index, history=tuple(history),
                                       meta={**parsed.meta, **tags}))
        history.append(Turn(text=parsed.question, answer=parsed.answers[0] if parsed.answers else None,
                            qid=parsed.qid))
    return out
