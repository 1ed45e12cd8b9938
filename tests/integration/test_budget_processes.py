"""The sweep's shared budget file (ragbench.budget_file) with real processes: two workers reserving and
settling at once grant exactly ``max_calls`` requests in all, and a worker killed (SIGKILL) while it holds
reservations leaves the file usable, its reservations booked as spent by the next process to change it."""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

from ragbench.budget import Budget, Ledger
from ragbench.budget_file import FILE, LedgerFile
from ragbench.errors import BudgetExhaustedError
from ragbench.tracking.owner import owner, owner_gone
from ragbench.types import Usage

MAX_CALLS = 40


def _file(path: str) -> LedgerFile:
    return LedgerFile(Path(path), sweep="run1", owner=owner(), gone=owner_gone)


def _spend(path: str, start: multiprocessing.synchronize.Event, granted: multiprocessing.Queue) -> None:
    """A worker: reserves and settles until the budget stops it; puts how many requests it was granted."""
    ledger = Ledger()
    ledger.start_job(Budget(max_calls=MAX_CALLS, max_usd=100.0), shared=_file(path))
    start.wait()
    n = 0
    try:
        while True:
            hold = ledger.reserve(0.5)
            n += 1
            ledger.settle("llm", Usage(prompt_tokens=1, cost_usd=0.25), hold)
    except BudgetExhaustedError:
        granted.put(n)


def _hold_then_hang(path: str, held: multiprocessing.synchronize.Event) -> None:
    ledger = Ledger()
    ledger.start_job(Budget(max_calls=10), shared=_file(path))
    for _ in range(3):
        ledger.reserve()
    held.set()
    signal.pause()  # killed here, its three requests "in flight"


def test_two_processes_are_granted_exactly_max_calls_in_all(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    start, granted = ctx.Event(), ctx.Queue()
    path = str(tmp_path / FILE)
    procs = [ctx.Process(target=_spend, args=(path, start, granted)) for _ in range(2)]
    for p in procs:
        p.start()
    start.set()
    counts = [granted.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert sum(counts) == MAX_CALLS, counts
    tally = _file(path).read()
    assert (tally.calls, tally.holds, tally.lost) == (MAX_CALLS, {}, 0)
    assert tally.usd == 0.25 * MAX_CALLS
    print(f"\ntwo processes granted {counts} of max_calls={MAX_CALLS}")


def test_a_worker_killed_while_holding_reservations_leaves_the_ledger_usable(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    held = ctx.Event()
    path = str(tmp_path / FILE)
    proc = ctx.Process(target=_hold_then_hang, args=(path, held))
    proc.start()
    assert held.wait(120)
    assert _file(path).read().held_calls == 3
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(60)
    ledger = Ledger()
    ledger.start_job(Budget(max_calls=10), shared=_file(path))  # the next process: reaps, then goes on
    tally = _file(path).read()
    assert (tally.calls, tally.lost, tally.holds) == (3, 3, {})
    for _ in range(7):
        ledger.settle("llm", Usage(), ledger.reserve())
    try:
        ledger.reserve()
        raise AssertionError("the 11th request was granted")
    except BudgetExhaustedError as exc:
        assert "budget.max_calls=10 reached (10 LLM requests sent" in str(exc)
