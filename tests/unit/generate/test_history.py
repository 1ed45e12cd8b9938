"""generate.history (ragbench.generate.history): what the generator reads of a turn's earlier turns, the
rounds of the generate wave under history=own, the prompt and the answer's cache key."""

from __future__ import annotations

import pytest

from ragbench.cache.keys import answer_key
from ragbench.errors import ConfigError
from ragbench.generate.history import HistoryPolicy, count_tokens, history_policy, rounds
from ragbench.generate.prompts import load_answer_prompt
from ragbench.types import Query, Turn

HISTORY = tuple(Turn(f"question {i}", f"answer {i}", f"c#{i}") for i in (1, 2, 3))
TURN = Query(qid="c#4", text="and then?", answers=("x",), question_type="t", conversation="c", turn=4,
             history=HISTORY)


def test_reference_keeps_the_last_turns_under_the_cap():
    assert HistoryPolicy(turns=2).for_generation(TURN).history == HISTORY[1:]
    capped = HistoryPolicy(turns=3, max_tokens=2 * count_tokens("question 1 answer 1")).for_generation(TURN)
    assert capped.history == HISTORY[1:]  # the oldest dropped first
    assert HistoryPolicy(mode="none").for_generation(TURN).history == ()
    assert HistoryPolicy(turns=0).for_generation(TURN).history == ()


def test_own_takes_this_jobs_answers():
    got = HistoryPolicy(mode="own").for_generation(TURN, {"c#2": "mine", "c#3": None})
    assert [(t.text, t.answer) for t in got.history] == [("question 1", None), ("question 2", "mine"),
                                                          ("question 3", None)]


def test_bad_settings_are_one_line():
    with pytest.raises(ConfigError, match="generate.history='gold'"):
        HistoryPolicy(mode="gold")
    with pytest.raises(ConfigError, match="generate.history_turns"):
        history_policy({"history_turns": -1})
    with pytest.raises(ConfigError, match="generate.turns is not a setting"):
        history_policy({"turns": 2})


def test_rounds_generate_each_turn_after_the_earlier_ones():
    qs = [Query(qid="x", text="?", answers=(), question_type="t"),
          Query(qid="a#2", text="?", answers=(), question_type="t", conversation="a", turn=2),
          Query(qid="a#1", text="?", answers=(), question_type="t", conversation="a", turn=1),
          Query(qid="b#1", text="?", answers=(), question_type="t", conversation="b", turn=1)]
    assert rounds(HistoryPolicy(mode="own"), qs) == [[0, 2, 3], [1]]
    assert rounds(HistoryPolicy(mode="reference"), qs) == [[0, 1, 2, 3]]


def test_the_prompt_and_the_cache_key_hold_the_history():
    messages = load_answer_prompt("default").messages(HistoryPolicy(turns=1).for_generation(TURN), [],
                                                      dataset=None)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1]["content"] == "question 3" and messages[2]["content"] == "answer 3"
    alone = Query(qid="c#4", text="and then?", answers=("x",), question_type="t")
    assert answer_key("g", alone, []) != answer_key("g", TURN, [])
    assert answer_key("g", TURN, []) != answer_key("g", HistoryPolicy(turns=1).for_generation(TURN), [])
