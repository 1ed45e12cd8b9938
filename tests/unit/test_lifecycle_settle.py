"""A job's run and its case files (``ragbench.lifecycle`` with ``ragbench.tracking.background``): the run
ends once the files are uploaded -- at the job's end, or, in a sweep whose callback runs in this process,
when the next job starts (``settle``) -- and never FINISHED without them. Children are real forks."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from ragbench import lifecycle
from ragbench.lifecycle import Interrupted, JobRun
from ragbench.tracking import background, job_log, sweep
from tests.unit.test_lifecycle import CFG, COMPONENTS, RecordingTracker

pytestmark = pytest.mark.skipif(not background.can_fork(), reason="fork-based writer: Linux only")
FILES = {"cases.jsonl": "{}\n", "case_scores.json": "{}", "cases_table.json": '{"columns": [], "data": []}'}
PARENT = os.getpid()


class FolderTracker(RecordingTracker):
    """Records the uploaded case files and every run's end, in order."""

    background_artifacts = True

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, ...]] = []
        self._runs = 0

    def start_run(self, *, run_name: str, tags: Any, parent_run_id: str | None = None) -> str:
        super().start_run(run_name=run_name, tags=tags, parent_run_id=parent_run_id)
        self._runs += 1
        self.events.append(("start", f"run-{self._runs}"))
        return f"run-{self._runs}"

    def log_folder(self, run_id: str, folder: Path, *, tables: Any = ()) -> None:
        self.events.append(("upload", run_id, *sorted(p.name for p in folder.iterdir()), *tables))

    def end_run(self, run_id: str, status: str) -> None:
        super().end_run(run_id, status)
        self.events.append(("end", run_id, status))


@pytest.fixture(autouse=True)
def _isolated(monkeypatch):
    monkeypatch.setattr(lifecycle, "job_hash", lambda resolved: "h" * 16)
    monkeypatch.setattr(lifecycle, "start_tags", lambda cfg, components: {})
    monkeypatch.setattr(job_log, "log_job", lambda *args, **kwargs: {})
    monkeypatch.setitem(sweep._PARENTS, "/sweeps/here", "p")  # the sweep "p" has its callback in this process
    yield
    lifecycle._SETTLING.clear()


def _case_files(fault: str | None = None):
    def make(result: Any, topk: int) -> dict[str, str]:
        if fault == "hangs" and os.getpid() != PARENT:
            time.sleep(30)  # a child that does not finish (stopped by the interrupt)
        if fault == "everywhere":
            raise ValueError("a record JSON cannot write")
        return FILES
    return make


def _logs(job: JobRun, components: Any) -> dict[str, float]:
    job.log_result(object(), topk=5, extra_tags={})
    return {"answer/f1": 0.75}


def _job(tracker: FolderTracker, parent: str | None, multirun: bool = True) -> JobRun:
    return JobRun(CFG, tracker, name="#0 x", parent=parent, multirun=multirun)  # type: ignore[arg-type]


UPLOAD = ("upload", "run-1", "case_scores.json", "cases.jsonl", "cases_table.json", "cases_table.json")


def test_in_this_process_sweep_the_run_ends_when_the_next_job_logs(monkeypatch):
    monkeypatch.setattr(job_log, "case_files", _case_files())
    monkeypatch.setattr(lifecycle, "job_hash", lambda resolved: resolved["dataset"]["name"])
    tracker = FolderTracker()
    assert _job(tracker, "p").run(_logs, COMPONENTS) == 0.75  # type: ignore[arg-type]
    assert tracker.events == [("start", "run-1")]  # open: its child is writing the files
    other = JobRun(OmegaConf.merge(CFG, {"dataset": {"name": "e"}}), tracker, name="#1 y", parent="p",
                   multirun=True)  # type: ignore[arg-type]
    other.run(_logs, COMPONENTS)  # type: ignore[arg-type]
    # settled when the next job logged its result (its pipeline ran beside the child), not before it started
    assert tracker.events == [("start", "run-1"), ("start", "run-2"), UPLOAD, ("end", "run-1", "FINISHED")]
    lifecycle.settle()  # what the sweep's end does
    assert tracker.events[-1] == ("end", "run-2", "FINISHED") and not lifecycle._SETTLING


def test_the_same_job_again_settles_first_so_resume_finds_it_finished(monkeypatch):
    monkeypatch.setattr(job_log, "case_files", _case_files())
    tracker = FolderTracker()
    _job(tracker, "p").run(_logs, COMPONENTS)  # type: ignore[arg-type]
    _job(tracker, "p").run(_logs, COMPONENTS)  # type: ignore[arg-type]  (same config: same job hash)
    assert tracker.events[:4] == [("start", "run-1"), UPLOAD, ("end", "run-1", "FINISHED"), ("start", "run-2")]


@pytest.mark.parametrize(("parent", "multirun"), [(None, False), ("a-worker-sweep", True)], ids=["alone", "worker"])
def test_elsewhere_the_run_ends_with_its_files_at_the_jobs_end(monkeypatch, parent, multirun):
    monkeypatch.setattr(job_log, "case_files", _case_files())
    tracker = FolderTracker()
    _job(tracker, parent, multirun).run(_logs, COMPONENTS)  # type: ignore[arg-type]
    assert tracker.events == [("start", "run-1"), UPLOAD, ("end", "run-1", "FINISHED")]
    assert not lifecycle._SETTLING


def test_files_that_cannot_be_written_fail_the_job_in_a_sweep(monkeypatch):
    monkeypatch.setattr(job_log, "case_files", _case_files("everywhere"))
    tracker = FolderTracker()
    _job(tracker, "p").run(_logs, COMPONENTS)  # type: ignore[arg-type]
    lifecycle.settle()
    assert tracker.events == [("start", "run-1"), ("end", "run-1", "FAILED")]  # the sweep then exits 1
    assert tracker.tags["ragbench.error"] == "ValueError: a record JSON cannot write"


def test_files_that_cannot_be_written_fail_a_worker_job_with_a_nan_objective(monkeypatch):
    monkeypatch.setattr(job_log, "case_files", _case_files("everywhere"))
    tracker = FolderTracker()
    got = _job(tracker, "a-worker-sweep").run(_logs, COMPONENTS)  # type: ignore[arg-type]
    assert got is not None and math.isnan(got)
    assert tracker.events[-1] == ("end", "run-1", "FAILED")


def test_files_that_cannot_be_written_alone_raise_the_error(monkeypatch):
    monkeypatch.setattr(job_log, "case_files", _case_files("everywhere"))
    tracker = FolderTracker()
    with pytest.raises(ValueError, match="JSON cannot write"):
        _job(tracker, None, multirun=False).run(_logs, COMPONENTS)  # type: ignore[arg-type]
    assert tracker.events[-1] == ("end", "run-1", "FAILED")


def test_an_interrupt_stops_a_child_still_writing_and_the_run_ends_killed(monkeypatch):
    monkeypatch.setattr(job_log, "case_files", _case_files("hangs"))
    tracker = FolderTracker()
    _job(tracker, "p").run(_logs, COMPONENTS)  # type: ignore[arg-type]
    started = time.monotonic()
    lifecycle.settle(interrupted=True)
    assert time.monotonic() - started < 5
    assert tracker.events == [("start", "run-1"), ("end", "run-1", "KILLED")]  # a rerun runs the job again


def test_an_interrupt_while_the_files_are_awaited_ends_the_run_killed_once(monkeypatch):
    monkeypatch.setattr(job_log, "case_files", _case_files())
    tracker = FolderTracker()
    job = _job(tracker, "p")
    job.run(_logs, COMPONENTS)  # type: ignore[arg-type]
    staged = job._staged

    def interrupted_wait(*args: Any) -> None:
        raise Interrupted(15)

    monkeypatch.setattr(staged, "wait", interrupted_wait)
    with pytest.raises(Interrupted):
        lifecycle.settle()
    assert lifecycle._SETTLING == [job]  # still listed: the top-level handler settles again
    lifecycle.settle(interrupted=True)
    assert tracker.events == [("start", "run-1"), ("end", "run-1", "KILLED")] and not lifecycle._SETTLING


def test_a_finished_child_is_uploaded_after_an_interrupt(monkeypatch):
    monkeypatch.setattr(job_log, "case_files", _case_files())
    tracker = FolderTracker()
    _job(tracker, "p").run(_logs, COMPONENTS)  # type: ignore[arg-type]
    time.sleep(0.3)  # the child has written every file
    lifecycle.settle(interrupted=True)
    assert tracker.events == [("start", "run-1"), UPLOAD, ("end", "run-1", "FINISHED")]


def test_a_failed_job_still_uploads_its_case_files(monkeypatch):
    monkeypatch.setattr(job_log, "case_files", _case_files())
    tracker = FolderTracker()

    def logs_then_fails(job: JobRun, components: Any) -> dict[str, float]:
        _logs(job, components)
        raise RuntimeError("failure rate above max_failure_rate")

    got = _job(tracker, "p").run(logs_then_fails, COMPONENTS)  # type: ignore[arg-type]
    assert got is not None and math.isnan(got)
    assert tracker.events == [("start", "run-1"), UPLOAD, ("end", "run-1", "FAILED")]
