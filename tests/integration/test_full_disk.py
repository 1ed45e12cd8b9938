"""A full disk under a real sweep (``python -m ragbench -m`` in a subprocess): the MLflow store's sqlite
driver, or the stage cache, starts failing with "database or disk is full" / ENOSPC part way through a job.
The sweep stops at the first failed write with one line naming the store, the free space and the fix,
exits 1 with no traceback; after space is freed the same command resumes, closes what was left RUNNING
and ends with the figures of an uninterrupted sweep.

The failure is injected where the disk would give it (the store's sqlite driver via SQLAlchemy's
``before_cursor_execute`` event, the cache's entry write) so no filesystem has to be mounted. And a store file
cut to half its size is one line naming it and the fix, not sqlite's "database disk image is malformed"."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SWEEP = ["-m", "retrieval=bm25", "dataset=qasper", "retrieval.topk=3,5", "dataset.max_queries=4"]
KEYS = ("retrieval/mrr", "retrieval/hit_at_5", "answer/f1", "context/tokens", "cases/total")

# Every write to the store fails from the first metrics insert on: a disk that filled up while the first
# job ran, so full that not even a run's status can be updated.
FULL_STORE = """
import sqlite3, sys
from sqlalchemy import event
from sqlalchemy.engine import Engine
full = []
@event.listens_for(Engine, "before_cursor_execute")
def _disk(conn, cursor, statement, parameters, context, executemany):
    words = statement.lstrip().upper()
    if words.startswith("INSERT INTO METRICS"):
        full.append(1)
    if full and words.startswith(("INSERT", "UPDATE", "DELETE")):
        raise sqlite3.OperationalError("database or disk is full")
"""
# The stage cache's disk is full: every entry it writes fails with ENOSPC.
FULL_CACHE = """
import errno
from ragbench.cache.store import StageCache
def _store(self, stage, key, stage_dir, target, manifest, value, save):
    raise OSError(errno.ENOSPC, "No space left on device", str(target))
StageCache._store = _store
"""
# The disk under the working folder is full (the stage cache's has room): the case lines of the job's record
# (cases.jsonl, flushed as each case finishes) fail with ENOSPC, which names no file.
FULL_OUTPUT = """
import errno, os, shutil
from ragbench.record import RecordWriter
usage = shutil.disk_usage
def _usage(path):
    here = usage(path)
    return here._replace(free=0) if os.path.abspath(path).startswith(os.path.abspath("multirun")) else here
shutil.disk_usage = _usage
def _case(self, record):
    raise OSError(errno.ENOSPC, "No space left on device")
RecordWriter.case = _case
"""
RUN = "import sys\nsys.argv = ['ragbench', *sys.argv[1:]]\nfrom ragbench.__main__ import cli\ncli()\n"


def _ragbench(cwd: Path, args: list[str], inject: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", inject + RUN, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


def _jobs(cwd: Path) -> dict[str, tuple[str, dict[str, float]]]:
    """Per job run of the store: its topk -> (status, metrics), straight from the sqlite file."""
    con = sqlite3.connect(cwd / "mlruns" / "mlflow.db")
    try:
        runs = con.execute("select r.run_uuid, r.status from runs r join tags t on t.run_uuid = r.run_uuid "
                           "and t.key = 'ragbench.role' and t.value = 'job'").fetchall()
        out = {}
        for run_id, status in runs:
            topk = con.execute("select value from params where run_uuid = ? and key = 'retrieval.topk'",
                               (run_id,)).fetchone()
            metrics = dict(con.execute("select key, value from latest_metrics where run_uuid = ?", (run_id,)))
            if status == "FINISHED":
                out[topk[0]] = (status, {k: metrics[k] for k in KEYS if k in metrics})
        return out
    finally:
        con.close()


def _statuses(cwd: Path) -> list[str]:
    con = sqlite3.connect(cwd / "mlruns" / "mlflow.db")
    try:
        return [s for (s,) in con.execute("select status from runs")]
    finally:
        con.close()


def _one_line(proc: subprocess.CompletedProcess, phrase: str) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "Traceback" not in out and "ERROR mlflow" not in out, out[-3000:]
    lines = [line for line in proc.stderr.splitlines() if "no space left" in line]
    assert len(lines) == 1 and phrase in lines[0], out[-3000:]
    assert "free there" in lines[0] and "fix: free space there" in lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    """The folder of the same sweep, run uninterrupted."""
    cwd = tmp_path_factory.mktemp("reference")
    proc = _ragbench(cwd, [*SWEEP, f"cache.dir={cwd}/cache"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cwd


@pytest.fixture(scope="module")
def reference(uninterrupted) -> dict[str, tuple[str, dict[str, float]]]:
    """The figures of the uninterrupted sweep."""
    return _jobs(uninterrupted)


def test_a_full_store_stops_the_sweep_in_one_line_and_the_resume_completes(tmp_path, reference):
    args = [*SWEEP, f"cache.dir={tmp_path}/cache"]
    line = _one_line(_ragbench(tmp_path, args, FULL_STORE), f"the MLflow store {tmp_path}/mlruns/mlflow.db")
    assert "left RUNNING: the next run on this store closes them as KILLED" in line  # the job's and the sweep's
    assert _statuses(tmp_path).count("RUNNING") == 2
    resumed = _ragbench(tmp_path, args)  # space freed: the same command
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "RUNNING" not in _statuses(tmp_path)
    assert _jobs(tmp_path) == reference


def test_a_full_cache_stops_the_sweep_in_one_line_and_the_resume_completes(tmp_path, reference):
    args = [*SWEEP, f"cache.dir={tmp_path}/cache"]
    line = _one_line(_ragbench(tmp_path, args, FULL_CACHE), f"the stage cache {tmp_path}/cache/")
    assert "ended KILLED" in line and "point cache.dir at a disk with room" in line
    assert sorted(_statuses(tmp_path)) == ["KILLED", "KILLED"]  # the job and the sweep: nothing RUNNING
    resumed = _ragbench(tmp_path, args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _jobs(tmp_path) == reference


def test_a_store_cut_to_half_its_size_is_one_line_naming_it_and_the_fix(tmp_path, uninterrupted):
    store = tmp_path / "mlruns" / "mlflow.db"
    store.parent.mkdir()
    data = (uninterrupted / "mlruns" / "mlflow.db").read_bytes()
    store.write_bytes(data[: len(data) // 2])
    proc = _ragbench(tmp_path, [*SWEEP, f"cache.dir={uninterrupted}/cache"])
    assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    [line] = [ln for ln in proc.stderr.splitlines() if "is damaged" in ln]
    assert f"the store {store} is damaged ({len(data) // 2:,} bytes where its header says {len(data):,}" in line
    assert f"fix: move it aside (mv {store} {store}.damaged) and rerun" in line


def test_a_full_disk_under_the_working_folder_names_that_disk_not_the_stage_cache(tmp_path):
    """Issue 45.5: this was "no space left for the stage cache ... (78.2 GB free there) ... point cache.dir at
    a disk with room"."""
    cache = tmp_path / "elsewhere" / "cache"
    line = _one_line(_ragbench(tmp_path, [*SWEEP, f"cache.dir={cache}"], FULL_OUTPUT),
                     f"the job's output folder {tmp_path}/multirun/")
    assert "(0 bytes free there)" in line and "point hydra.run.dir / hydra.sweep.dir at a disk with room" in line
    assert "for the stage cache" not in line and "cache.dir" not in line and "ended KILLED" in line
