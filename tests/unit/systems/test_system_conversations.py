"""Outside systems and conversations: a python callable receives a turn's history, an HTTP system's
payload carries it, and a responses file holds one line per turn (a missing turn fails its case in one
line naming the fix)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ragbench.systems.client import payload
from ragbench.systems.python_system import PythonSystem
from ragbench.systems.responses import MissingResponseError, ResponsesSource
from ragbench.types import Query, Turn

TURN = Query(qid="c1#2", text="And the second one?", answers=("b",), question_type="t", conversation="c1",
             turn=2, history=(Turn("Name two colours.", "red and blue", "c1#1"),))
SEEN: list[Any] = []


def answer(question: str, history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    SEEN.append(history)
    return {"answer": f"{len(history or [])} earlier turns", "contexts": []}


def answer_without_history(question: str) -> dict[str, Any]:
    return {"answer": "no history", "contexts": []}


def test_the_payload_carries_the_turn_and_its_history():
    ask = payload(TURN, None, {})
    assert (ask["conversation"], ask["turn"]) == ("c1", 2)
    assert ask["history"] == [{"question": "Name two colours.", "answer": "red and blue"}]
    assert "history" not in payload(Query(qid="q", text="?", answers=(), question_type="t"), None, {})


def test_a_python_callable_receives_the_history():
    SEEN.clear()
    record = PythonSystem(target=f"{__name__}:answer").record(TURN)
    assert record.answer == "1 earlier turns"
    assert SEEN == [[{"question": "Name two colours.", "answer": "red and blue"}]]
    assert PythonSystem(target=f"{__name__}:answer_without_history").record(TURN).answer == "no history"


def test_a_responses_file_holds_one_line_per_turn(tmp_path):
    path = tmp_path / "responses.jsonl"
    path.write_text(json.dumps({"qid": "c1#1", "answer": "red and blue", "contexts": []}) + "\n", encoding="utf-8")
    source = ResponsesSource(path=str(path))
    first = Query(qid="c1#1", text="Name two colours.", answers=(), question_type="t", conversation="c1", turn=1)
    assert source.record(first).answer == "red and blue"
    with pytest.raises(MissingResponseError) as err:
        source.record(TURN)
    assert str(err.value) == (f"responses file {path} has no record for turn 2 of conversation 'c1'; the case fails "
                              "(scored 0); fix: write one line per turn, with qid 'c1#2'")
