"""An attempt abandoned at its deadline is still in flight (the server still works on it): it keeps its
client's place until it really ends, so a retry or the next call never pushes the requests in flight past
``max_concurrency``; and when every place is held by an attempt that never ends, the next attempt fails at
after waiting a deadline's length instead of waiting for ever."""

from __future__ import annotations

import threading

import pytest

from ragbench.llm.deadline import DeadlinePassed, holding, within


def test_an_abandoned_attempt_keeps_its_place_until_it_ends():
    places = threading.BoundedSemaphore(1)
    release = threading.Event()
    first_ended = threading.Event()
    seen: list[bool] = []

    def slow() -> str:
        release.wait(10)
        first_ended.set()
        return "late"

    def retry() -> str:
        seen.append(first_ended.is_set())  # sent only once the abandoned attempt gave its place back
        return "ok"

    with holding(places, 1, 0.3):
        with pytest.raises(DeadlinePassed):
            within(0.05, slow)
        assert places.acquire(blocking=False) is False  # the abandoned attempt holds the one place
        threading.Timer(0.2, release.set).start()
        assert within(5, retry) == "ok"
    assert seen == [True]
    assert places.acquire(blocking=False) is True  # the call gave its place back at the end
    places.release()


def test_a_second_call_waits_for_the_place_an_abandoned_attempt_holds():
    places = threading.BoundedSemaphore(1)
    release = threading.Event()
    order: list[str] = []

    def slow() -> None:
        release.wait(10)
        order.append("abandoned attempt ended")

    with holding(places, 1, 0.3), pytest.raises(DeadlinePassed):
        within(0.05, slow)

    def other_call() -> None:
        with holding(places, 1, 0.3):
            order.append("next call sent")

    caller = threading.Thread(target=other_call)
    caller.start()
    release.set()
    caller.join(10)
    assert order == ["abandoned attempt ended", "next call sent"]


def test_every_place_held_by_a_never_ending_attempt_fails_the_next_attempt_instead_of_waiting_for_ever():
    places = threading.BoundedSemaphore(1)
    never = threading.Event()
    with holding(places, 1, 0.3):
        with pytest.raises(DeadlinePassed):
            within(0.05, lambda: never.wait(30))
        with pytest.raises(DeadlinePassed, match="all 1 are held by attempts abandoned at their deadline"):
            within(0.3, lambda: "never sent")
    with holding(places, 1, 0.3) as slot:  # nor does a new call wait for ever: it runs without a place
        assert slot.held is False
        with pytest.raises(DeadlinePassed, match="no place to send it"):
            within(0.3, lambda: "never sent")
    never.set()
