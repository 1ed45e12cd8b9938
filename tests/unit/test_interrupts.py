"""SIGINT/SIGTERM set a flag that the work acts on at its next safe point; a second signal stops at once."""

from __future__ import annotations

import os
import signal

import pytest

from ragbench import interrupts
from ragbench.interrupts import Interrupted


@pytest.fixture(autouse=True)
def handlers():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    interrupts.reset()
    interrupts.install()
    yield
    interrupts.reset()
    for sig, handler in before.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_first_signal_is_acted_on_at_the_next_safe_point(sig, capsys):
    steps = []
    os.kill(os.getpid(), sig)
    steps.append("the work in hand went on")  # no exception between safe points
    assert interrupts.requested() == sig
    with pytest.raises(Interrupted) as raised:
        interrupts.check()
    assert steps == ["the work in hand went on"] and raised.value.signum == sig
    assert "stopping at the next safe point" in capsys.readouterr().err


def test_a_second_signal_stops_at_once():
    os.kill(os.getpid(), signal.SIGTERM)
    with pytest.raises(Interrupted):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10_000_000):  # the handler runs before this loop can finish
            pass
        pytest.fail("not interrupted")


def test_no_signal_no_interrupt():
    interrupts.check()
    assert interrupts.requested() is None
