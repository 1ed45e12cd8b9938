"""A signal inside ``deferred()`` waits for the block to end; outside it interrupts at once."""

from __future__ import annotations

import os
import signal

import pytest

from ragbench import signals
from ragbench.signals import Deferred, Interrupted


@pytest.fixture(autouse=True)
def handlers():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signals.install_handlers()
    yield
    for sig, handler in before.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_inside_a_deferred_block_is_raised_when_it_ends(sig):
    done = []
    with pytest.raises(Interrupted) as info:
        with signals.deferred():
            os.kill(os.getpid(), sig)
            done.append("the rest of the block ran")
    assert done == ["the rest of the block ran"] and info.value.signum == sig


def test_nested_blocks_raise_once_at_the_outermost_end():
    steps = []
    with pytest.raises(Interrupted):
        with signals.deferred():
            with signals.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
            steps.append("inner ended, outer still running")
    assert steps == ["inner ended, outer still running"]
    with signals.deferred():  # nothing held any more
        pass


def test_outside_a_block_the_signal_interrupts_at_once():
    with pytest.raises(Interrupted):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10_000_000):  # the handler runs before this loop can finish
            pass
        pytest.fail("not interrupted")


def test_the_deferred_proxy_runs_each_call_whole():
    class Store:
        def __init__(self) -> None:
            self.writes: list[str] = []
            self.name = "store"

        def write(self, what: str) -> int:
            os.kill(os.getpid(), signal.SIGTERM)  # mid-write
            self.writes.append(what)
            return len(self.writes)

    store = Store()
    proxy = Deferred(store)
    assert proxy.name == "store" and proxy.wrapped is store
    with pytest.raises(Interrupted):
        proxy.write("whole")
    assert store.writes == ["whole"]  # the write finished before the interrupt


def test_the_deferred_proxy_survives_pickling():
    # the joblib, Ray and submitit launchers pickle the sweep callback, and with it the tracker's client
    import pickle

    proxy = pickle.loads(pickle.dumps(Deferred({"a": 1})))
    assert proxy.wrapped == {"a": 1} and proxy.get("a") == 1
