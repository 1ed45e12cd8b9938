"""Sweeps running the same job at once (one experiment, one config: one ``ragbench.job_hash``) run it once.

Resume (``ragbench.job``) reuses a FINISHED run of the job; a run still RUNNING in another sweep was not
reusable, so two sweeps started together each ran their shared jobs (a team's sweeps on one server, or
three terminals). Now each job, once its run is open, looks for an *earlier* RUNNING run of the same job
(start time, then run id) whose process is not verifiably gone, or one that finished in between. Where
there is one, it is awaited and the job resumed from it like any finished run (a copy under this sweep);
this run is then withdrawn (ended KILLED, tagged ``ragbench.yielded_to``, deleted: no sweep lists it). If
it does not finish, the job runs here after all. The earliest run never waits, so none wait on each other.

The order is the runs' start times, which each client stamps: sweeps on machines whose clocks disagree by
more than the gap between their two starts can still both run a job (NTP keeps that to milliseconds).
A run of another host whose process died stays RUNNING until a sweep on that host closes it: the wait
logs which run it waits for; Ctrl-C stops it (the rerun resumes).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ragbench import interrupts
from ragbench.record import REUSED_FROM
from ragbench.tracking.owner import OWNER_TAG, owner_gone

log = logging.getLogger(__name__)
JOB_HASH_TAG = "ragbench.job_hash"
YIELDED_TAG = "ragbench.yielded_to"
POLL_S = 1.0
LOG_EVERY_S = 60.0
END_MARGIN_MS = 60_000


def _order(run: Any) -> tuple[int, str]:
    return int(run.info.start_time or 0), str(run.info.run_id)


def earlier_run(tracker: Any, job_hash: str, run_id: str) -> Any | None:
    """The earliest run of the job opened before ``run_id`` (start time, then id; not a resume copy) that is
    RUNNING in a process not verifiably gone, or that FINISHED about when ``run_id`` opened (too late for
    this job's look for one to resume); None when ``run_id`` is the earliest."""
    runs = tracker.runs_with_tag(JOB_HASH_TAG, job_hash)
    mine = next((r for r in runs if r.info.run_id == run_id), None)
    if mine is None:
        return None
    since = int(mine.info.start_time or 0) - END_MARGIN_MS
    rivals = [r for r in runs if r.info.run_id != run_id and REUSED_FROM not in r.data.tags
              and _order(r) < _order(mine) and _contends(r, since)]
    return min(rivals, key=_order) if rivals else None


def _contends(run: Any, since_ms: int) -> bool:
    """RUNNING in a live (or unknown) process, or FINISHED at or after ``since_ms``."""
    if run.info.status == "FINISHED":
        return int(run.info.end_time or 0) >= since_ms
    return run.info.status == "RUNNING" and owner_gone(run.data.tags.get(OWNER_TAG)) is not True


def settled(tracker: Any, run_id: str, job_hash: str, resume: Callable[[], Any]) -> Any | None:
    """Called once the job's run ``run_id`` is open. Where an earlier run of the job contends
    (``earlier_run``), waits for it to end, then ``resume()``; where that reuses it, ``run_id`` is withdrawn
    and the resumed record returned. None: ``run_id`` goes on (it is the earliest, or the earlier one did
    not finish). This run stays RUNNING while it waits, so a later sweep waits for the earliest, not it."""
    earlier = earlier_run(tracker, job_hash, run_id)
    if earlier is None:
        return None
    wait_for(tracker, earlier, f"job {earlier.info.run_name or job_hash[:12]}")
    previous = resume()
    if previous is not None:
        withdraw(tracker, run_id, earlier)
    return previous


def withdraw(tracker: Any, run_id: str, earlier: Any) -> None:
    """This run gives way to ``earlier``: ended KILLED, tagged, deleted (no sweep or resume sees it)."""
    tracker.set_tags(run_id, {YIELDED_TAG: earlier.info.run_id})
    tracker.end_run(run_id, "KILLED")
    tracker.client.delete_run(run_id)


def wait_for(tracker: Any, run: Any, what: str) -> str:
    """Waits until ``run`` ends (or its process is verifiably gone); returns its status."""
    started = last = time.monotonic()
    if run.info.status != "RUNNING":
        return str(run.info.status)
    log.info("%s: running in another sweep as run %s (process %s); waiting for it, then reusing it", what,
             run.info.run_id, run.data.tags.get(OWNER_TAG, "?"))
    while True:
        interrupts.check()  # a safe point: Ctrl-C stops the wait (this job's run was withdrawn)
        info = tracker.client.get_run(run.info.run_id)
        if info.info.status != "RUNNING":
            return str(info.info.status)
        if owner_gone(info.data.tags.get(OWNER_TAG)) is True:
            return "KILLED"
        now = time.monotonic()
        if now - last >= LOG_EVERY_S:
            last = now
            log.info("%s: still waiting for run %s (%.0f s)", what, run.info.run_id, now - started)
        time.sleep(POLL_S)
