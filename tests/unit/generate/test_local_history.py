"""A local model's window and a conversation's history (llm.context_overflow): truncate_contexts drops the
lowest-ranked contexts, then the oldest history turns; refuse is one line naming the history settings too.
The model is a stand-in that counts words (no weights load)."""

from __future__ import annotations

import pytest

from ragbench.generate.local import LocalGenerator
from ragbench.llm.local.client import LLMContextError
from ragbench.types import Context, Level, Query, Turn


class Words:
    context_window = 0  # set to fit the bare prompt, the last turn and max_tokens, not the first turn

    def count(self, messages) -> int:
        return sum(len(m["content"].split()) for m in messages)


TURN = Query(qid="c#3", text="and then?", answers=("x",), question_type="t", conversation="c", turn=3,
             history=(Turn("first " * 30, "one", "c#1"), Turn("second question", "two", "c#2")))
CTX = [Context(chunk_id="k", text="passage " * 10, title="T", level=Level.PARAGRAPH, hit_ids=("k",))]


def _gen(overflow: str) -> LocalGenerator:
    gen = LocalGenerator(max_tokens=8, context_overflow=overflow)
    bare = Words().count(gen.prompt.messages(Query(qid="q", text=TURN.text, answers=(), question_type="t"), [],
                                             dataset=None))
    Words.context_window = bare + 8 + 5  # room for "second question" / "two", not for the context (10 words)
    gen.client.local_model = lambda: Words()  # type: ignore[method-assign]
    return gen


def test_truncate_drops_contexts_then_the_oldest_turns():
    gen = _gen("truncate_contexts")
    query, kept = gen.fitted(TURN, CTX, count=False)
    assert [t.qid for t in query.history] == ["c#2"] and kept == []
    assert Words().count(gen.prompt.messages(query, kept, dataset=None)) <= Words.context_window - 8


def test_refuse_names_the_history_settings():
    with pytest.raises(LLMContextError, match="generate.history_turns, generate.history_max_tokens"):
        _gen("refuse").fitted(TURN, CTX, count=False)
