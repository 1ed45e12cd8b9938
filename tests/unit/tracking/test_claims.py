"""``ragbench.tracking.claims``: of two sweeps' runs of one job, the earlier goes on and the later yields
(a fake store: no MLflow)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragbench.record import REUSED_FROM
from ragbench.tracking import claims
from ragbench.tracking.owner import OWNER_TAG, owner


def run(run_id: str, start: int, status: str = "RUNNING", end: int | None = None, **tags: str):
    info = SimpleNamespace(run_id=run_id, run_name=run_id, start_time=start, status=status, end_time=end)
    return SimpleNamespace(info=info,
                           data=SimpleNamespace(tags={OWNER_TAG: owner(), **tags}))


class Tracker:
    def __init__(self, *runs) -> None:
        self.runs = list(runs)
        self.ended: dict[str, str] = {}
        self.tags: dict[str, dict[str, str]] = {}
        self.deleted: list[str] = []
        self.client = SimpleNamespace(delete_run=self.deleted.append)

    def runs_with_tag(self, key: str, value: str) -> list:
        assert key == claims.JOB_HASH_TAG
        return self.runs

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        self.tags.setdefault(run_id, {}).update(tags)

    def end_run(self, run_id: str, status: str) -> None:
        self.ended[run_id] = status


def test_the_earliest_run_goes_on_and_a_later_one_yields_to_it():
    tracker = Tracker(run("b", 200), run("a", 100), run("c", 300))
    assert claims.earlier_run(tracker, "h", "a") is None
    assert claims.earlier_run(tracker, "h", "b").info.run_id == "a"
    assert claims.earlier_run(tracker, "h", "c").info.run_id == "a"
    assert claims.earlier_run(tracker, "h", "c").info.run_id == "a"


def test_a_tie_on_start_time_goes_to_the_smaller_run_id():
    tracker = Tracker(run("x", 100), run("y", 100))
    assert claims.earlier_run(tracker, "h", "x") is None
    assert claims.earlier_run(tracker, "h", "y").info.run_id == "x"


def test_copies_failed_runs_and_dead_owners_do_not_count(monkeypatch):
    dead = run("dead", 1)
    dead.data.tags[OWNER_TAG] = "gone"
    monkeypatch.setattr(claims, "owner_gone", lambda tag: tag == "gone")
    tracker = Tracker(run("copy", 1, **{REUSED_FROM: "z"}), run("failed", 2, "FAILED", 5), dead,
                      run("me", 10))
    assert claims.earlier_run(tracker, "h", "me") is None


def test_a_run_that_finished_about_when_this_one_opened_counts_and_an_old_one_does_not():
    opened = 10_000_000
    recent = Tracker(run("done", 1, "FINISHED", end=opened - 5), run("me", opened))
    assert claims.earlier_run(recent, "h", "me").info.run_id == "done"
    old = Tracker(run("done", 1, "FINISHED", end=opened - claims.END_MARGIN_MS - 1), run("me", opened))
    assert claims.earlier_run(old, "h", "me") is None


def test_settled_waits_resumes_and_withdraws_only_when_the_earlier_run_is_reused(monkeypatch):
    monkeypatch.setattr(claims, "POLL_S", 0)
    tracker = Tracker(run("a", 1), run("me", 2))
    tracker.client.get_run = lambda run_id: run(run_id, 1, "FINISHED")
    assert claims.settled(tracker, "me", "h", lambda: "record") == "record"
    assert tracker.deleted == ["me"] and tracker.ended == {"me": "KILLED"}
    failed = Tracker(run("a", 1), run("me", 2))
    failed.client.get_run = lambda run_id: run(run_id, 1, "FAILED")
    assert claims.settled(failed, "me", "h", lambda: None) is None  # not reused: this run goes on
    assert failed.deleted == [] and failed.ended == {}
    first = Tracker(run("me", 1), run("b", 2))
    assert claims.settled(first, "me", "h", lambda: pytest.fail("the earliest never waits")) is None


def test_a_withdrawn_run_is_ended_tagged_and_deleted():
    tracker = Tracker()
    claims.withdraw(tracker, "mine", run("theirs", 1))
    assert tracker.ended == {"mine": "KILLED"} and tracker.tags["mine"] == {claims.YIELDED_TAG: "theirs"}
    assert tracker.deleted == ["mine"]


def test_waiting_returns_the_other_runs_status_once_it_ends(monkeypatch):
    states = iter(["RUNNING", "FINISHED"])
    tracker = Tracker()
    tracker.client.get_run = lambda run_id: run(run_id, 1, next(states))
    monkeypatch.setattr(claims, "POLL_S", 0)
    assert claims.wait_for(tracker, run("theirs", 1), "job x") == "FINISHED"
    assert claims.wait_for(tracker, run("done", 1, "FAILED"), "job x") == "FAILED"  # ended already: no wait
