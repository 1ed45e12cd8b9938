"""long_lived(): the collector pauses during a heavy load, and what the load made is frozen."""

from __future__ import annotations

import gc

import pytest

from ragbench.gc_tuning import long_lived


def test_collector_paused_inside_and_objects_frozen_after():
    assert gc.isenabled()
    before = gc.get_freeze_count()
    with long_lived():
        assert not gc.isenabled()
        made = [{"n": i} for i in range(1000)]  # stands in for a module's or a model's objects
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + len(made)
    # no gc.unfreeze(): it would also unfreeze what the session's earlier loads froze; the 1,000 frozen
    # dicts are still freed by reference counting


def test_collector_restored_on_error_and_left_off_if_it_was_off():
    with pytest.raises(ImportError), long_lived():
        raise ImportError("no such module")
    assert gc.isenabled()
    gc.disable()
    try:
        with long_lived():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_batch_thresholds_set_and_cycles_still_collected():
    from ragbench.gc_tuning import THRESHOLDS, for_batch_work

    old = gc.get_threshold()
    try:
        for_batch_work()
        assert gc.get_threshold() == THRESHOLDS
        cycle: list = []
        cycle.append(cycle)
        import weakref

        class Node:
            pass

        a, b = Node(), Node()
        a.other, b.other = b, a  # type: ignore[attr-defined]
        ref = weakref.ref(a)
        del a, b, cycle
        gc.collect()
        assert ref() is None
    finally:
        gc.set_threshold(*old)
