"""The sweep budget shared by worker processes (ragbench.budget_file): two ledgers over one file stand for
two processes (each its own owner), so requests in flight in either count against one ceiling, a dead
owner's reservations are booked as spent, and a file of another sweep starts afresh. Real processes:
tests/integration/test_budget_processes.py."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from ragbench import budget as budget_mod
from ragbench.budget import Budget, Ledger, SharedHold
from ragbench.budget_file import FILE, LedgerFile, LedgerFileError
from ragbench.errors import BudgetExhaustedError
from ragbench.types import Usage

DEAD: set[str] = set()


def _gone(owner: str) -> bool | None:
    return True if owner in DEAD else False


def _worker(path: Path, owner: str, budget: Budget, sweep: str = "run1") -> tuple[Ledger, LedgerFile]:
    ledger = Ledger()
    file = LedgerFile(path, sweep=sweep, owner=owner, gone=_gone)
    ledger.start_job(budget, shared=file)
    return ledger, file


@pytest.fixture()
def path(tmp_path: Path) -> Path:
    DEAD.clear()
    return tmp_path / FILE


def test_max_calls_counts_both_workers_requests_in_flight(path):
    budget = Budget(max_calls=5)
    a, file = _worker(path, "host:1:1", budget)
    b, _ = _worker(path, "host:2:1", budget)
    held = [a.reserve(), b.reserve(), a.reserve(), b.reserve(), b.reserve()]  # 5 in flight, none settled
    assert all(isinstance(h, SharedHold) for h in held)
    with pytest.raises(BudgetExhaustedError, match=r"budget.max_calls=5 reached \(5 LLM requests sent"):
        a.reserve()
    with pytest.raises(BudgetExhaustedError):  # the other worker sees the stop: the sweep's, in the file
        b.admit()
    for ledger, hold in zip((a, b, a, b, b), held, strict=True):
        ledger.settle("llm", Usage(prompt_tokens=2, completion_tokens=1, cost_usd=0.01), hold)
    tally = file.read()
    assert (tally.calls, tally.held_calls, tally.holds) == (5, 0, {})
    assert tally.usd == pytest.approx(0.05)
    assert tally.stopped is not None and tally.stopped.startswith("budget.max_calls=5 reached")
    assert [w.snapshot()["spent"]["llm"]["calls"] for w in (a, b)] == [2, 3]  # each job's own books


def test_a_worker_that_joins_later_is_not_started(path):
    a, file = _worker(path, "host:1:1", Budget(max_calls=1))
    a.settle("llm", Usage(), a.reserve())
    with pytest.raises(BudgetExhaustedError):
        a.reserve()
    later = Ledger()  # a fresh worker process: its own ledger has no stop, the file has
    assert later.sweep_stopped(file) == "budget.max_calls=1 reached (1 LLM requests sent, budget.scope=sweep)"
    assert Ledger().sweep_stopped(None) is None


def test_max_usd_waits_for_the_other_workers_request_then_fits(path):
    budget = Budget(max_usd=1.0)
    a, file = _worker(path, "host:1:1", budget)
    b, _ = _worker(path, "host:2:1", budget)
    first = a.reserve(0.6)  # $0.60 held by worker a: b's $0.60 request fits only once a's settles
    got: list[object] = []
    waiting = threading.Thread(target=lambda: got.append(b.reserve(0.6)))
    waiting.start()
    waiting.join(0.1)
    assert waiting.is_alive() and not got
    a.settle("llm", Usage(cost_usd=0.3), first)  # the real cost: $0.30 spent
    waiting.join(10)
    assert len(got) == 1
    tally = file.read()
    assert tally.usd == pytest.approx(0.3) and tally.held_usd == pytest.approx(0.6)
    hold = got[0]
    assert isinstance(hold, SharedHold)
    b.settle("judge", Usage(cost_usd=0.3), hold)
    with pytest.raises(BudgetExhaustedError, match=r"budget.max_usd=1 reached \(\$0.6000 spent; the next"):
        a.reserve(0.5)  # 0.6 spent + 0.5 > 1 with nothing in flight: never sent


def test_a_request_waiting_on_a_ledger_that_never_moves_stops(path, monkeypatch):
    monkeypatch.setattr(budget_mod, "SHARED_STALL_S", 0.1)
    a, _ = _worker(path, "other-host:1:1", Budget(max_usd=1.0))
    a.reserve(0.6)  # a process on another host, dead or alive: its hold cannot be checked
    b, _ = _worker(path, "host:2:1", Budget(max_usd=1.0))
    with pytest.raises(BudgetExhaustedError, match=r"\$0.6000 held by requests in flight that have not"):
        b.reserve(0.6)


def test_a_dead_workers_reservations_are_booked_as_spent(path):
    budget = Budget(max_calls=4, max_usd=10.0)
    dead, file = _worker(path, "host:1:1", budget)
    dead.reserve(1.5)
    dead.reserve(0.5)  # killed mid-request: nothing settles these
    DEAD.add("host:1:1")
    alive, _ = _worker(path, "host:2:1", budget)
    alive.settle("llm", Usage(cost_usd=0.25), alive.reserve(1.0))
    tally = file.read()
    assert (tally.calls, tally.lost, list(tally.holds)) == (3, 2, [])
    assert tally.usd == pytest.approx(2.25)  # the dead worker's at its reserved maximum, ours at its cost
    alive.reserve()  # the 4th request: the ledger is usable
    with pytest.raises(BudgetExhaustedError, match="max_calls=4"):
        alive.reserve()


def test_a_file_left_by_an_earlier_sweep_starts_afresh(path):
    old, _ = _worker(path, "host:1:1", Budget(max_calls=1), sweep="run1")
    old.settle("llm", Usage(), old.reserve())
    with pytest.raises(BudgetExhaustedError):
        old.reserve()
    new, file = _worker(path, "host:1:1", Budget(max_calls=1), sweep="run2")  # same folder, new parent run
    assert new.sweep_stopped(file) is None
    new.settle("llm", Usage(), new.reserve())
    assert (file.read().sweep, file.read().calls) == ("run2", 1)


def test_an_unlimited_or_job_budget_never_touches_the_file(path):
    for budget in (Budget(), Budget(max_calls=3, scope="job")):
        ledger, _ = _worker(path, "host:1:1", budget)
        hold = ledger.reserve()
        assert not isinstance(hold, SharedHold)
        ledger.settle("llm", Usage(), hold)
    assert not path.exists()


def test_an_unreadable_file_is_one_line_naming_it_and_the_fix(path):
    path.write_text("{not json")
    ledger = Ledger()
    with pytest.raises(LedgerFileError) as err:
        ledger.start_job(Budget(max_calls=2), shared=LedgerFile(path, sweep="r", owner="h:1:1", gone=_gone))
    message = str(err.value)
    assert "\n" not in message and str(path) in message and "fix: delete" in message
    path.write_text(json.dumps({"format": "something-else/1"}))
    with pytest.raises(LedgerFileError, match="not a ragbench budget file"):
        LedgerFile(path, sweep="r", owner="h:1:1", gone=_gone).read()


def test_max_minutes_counts_from_the_sweeps_first_limited_job(path, monkeypatch):
    a, file = _worker(path, "host:1:1", Budget(max_minutes=1.0))
    started = file.read().started
    assert started is not None
    _worker(path, "host:2:1", Budget(max_minutes=1.0))
    assert file.read().started == started  # the second worker's job does not restart the clock
    monkeypatch.setattr(budget_mod.time, "time", lambda: started + 61.0)
    with pytest.raises(BudgetExhaustedError, match=r"budget.max_minutes=1 reached \(1.0 min"):
        a.reserve()
