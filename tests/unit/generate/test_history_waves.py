"""generate.history=own in a real pipeline (toy components): each turn is generated after the earlier turns
of its conversation and reads this job's own answers to them; reference reads the data's answers."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

import pytest

from ragbench.generate.history import HistoryPolicy
from ragbench.pipeline import Pipeline
from ragbench.types import Answer, Context, EvalSet, Query, Turn
from tests.fixtures.toy import ToyAdapter, toy_components


class Conversations(ToyAdapter):
    """The toy corpus, with q1 -> q2 as one conversation's turns 1 and 2, and q3 alone."""

    def load(self) -> EvalSet:
        ev = super().load()
        q1, q2, q3 = ev.queries
        first = dataclasses.replace(q1, qid="c#1", conversation="c", turn=1)
        second = dataclasses.replace(q2, qid="c#2", conversation="c", turn=2,
                                     history=(Turn(first.text, "Tom (gold)", "c#1"),))
        return dataclasses.replace(ev, queries=(second, first, q3))  # a turn listed before its earlier turn


class Recording:
    identity = "recording"
    max_concurrency = 4

    def __init__(self) -> None:
        self.seen: list[tuple[str, tuple[tuple[str, str | None], ...]]] = []
        self.lock = threading.Lock()

    def answer(self, query: Query, contexts: Sequence[Context]) -> Answer:
        with self.lock:
            self.seen.append((query.qid, tuple((t.text, t.answer) for t in query.history)))
        return Answer(text=f"my answer to {query.qid}", model="m")


@pytest.mark.parametrize(("mode", "history"), [("own", "my answer to c#1"), ("reference", "Tom (gold)")])
def test_a_turn_reads_the_history_its_mode_gives(mode, history):
    gen = Recording()
    result = Pipeline(toy_components(dataset=Conversations(), generator=gen,
                                     history=HistoryPolicy(mode=mode))).run()
    order = [qid for qid, _ in gen.seen]
    if mode == "own":
        assert order.index("c#1") < order.index("c#2")  # generated after its earlier turn
    assert dict(gen.seen)["c#2"] == (("What is the cat called?", history),)
    assert dict(gen.seen)["c#1"] == () and [c.query.qid for c in result.cases] == ["c#2", "c#1", "q3"]
