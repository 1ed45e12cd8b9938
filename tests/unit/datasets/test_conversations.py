"""Conversations in the custom QA file (ragbench.datasets.conversations): turns become questions with
stable ids, history and tags; bad input is one DatasetError line naming the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragbench.datasets.custom import CustomAdapter
from ragbench.errors import DatasetError

DOCS = {"solar.md": "# Solar\n\nA typical home panel produces about 300 watts.\n\nPanels last about 25 years.\n",
        "wind.md": "# Wind\n\nLarge turbines stand over 100 metres tall.\n"}
GOOD = [
    {"id": "c1", "turns": [
        {"question": "How much power does a home solar panel produce?", "answers": ["about 300 watts"],
         "evidence": ["A typical home panel produces about 300 watts."]},
        {"question": "And how long do they last?", "answers": ["about 25 years"],
         "evidence": ["Panels last about 25 years."], "tags": {"followup": "follow-up"}, "turn": 2}]},
    {"id": "q9", "question": "How tall are large turbines?", "answers": ["over 100 metres"]},
]


def _load(tmp_path: Path, rows: list[dict]) -> list:
    for name, text in DOCS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return list(CustomAdapter(name="custom", path=str(tmp_path)).load().queries)


def test_turns_become_questions_with_stable_ids_history_and_tags(tmp_path):
    first, second, single = _load(tmp_path, GOOD)
    assert [q.qid for q in (first, second, single)] == ["c1#1", "c1#2", "q9"]
    assert (first.conversation, first.turn, first.history) == ("c1", 1, ())
    assert (second.conversation, second.turn) == ("c1", 2)
    assert [(t.text, t.answer, t.qid) for t in second.history] == [
        ("How much power does a home solar panel produce?", "about 300 watts", "c1#1")]
    assert second.meta["followup"] == "follow-up" and second.evidence
    assert single.conversation is None and single.turn == 0 and not single.history


@pytest.mark.parametrize(("rows", "said", "fix"), [
    ([{"id": "c1", "turns": [{"question": "a?", "turn": 2}, {"question": "b?", "turn": 1}]}],
     "turns out of order: turn 2 is listed at place 1", "list the turns in order"),
    ([{"id": "c1", "turns": [{"question": "a?"}]}, {"id": "c1", "turns": [{"question": "b?"}]}],
     "the conversation id 'c1' is used again (first on line 1)", "give every conversation its own id"),
    ([{"id": "c1", "turns": [{"question": "a?"}, {"answers": ["x"]}]}],
     "the turn has no message", '"question"'),
    ([{"id": "c1", "turns": []}], "turns must be a non-empty list", '"turns"'),
    ([{"id": "c#1", "turns": [{"question": "a?"}]}], "holds '#'", "without '#'"),
])
def test_bad_conversations_are_one_line_naming_the_fix(tmp_path, rows, said, fix):
    with pytest.raises(DatasetError) as err:
        _load(tmp_path, rows)
    text = str(err.value)
    assert said in text and fix in text and "qa.jsonl" in text
    assert "Traceback" not in text
