"""The MLflow store's faults, without MLflow: a full disk under a store write (the client's guard turns it
into ``DiskFull``; ``Job`` ends the run KILLED where the store still takes that, else says it is left
RUNNING; the one line names the store, the free space and the fix) and a store file cut short or garbled
(one line naming the file and the fix, before MLflow opens it)."""

from __future__ import annotations

import contextlib
import errno
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from omegaconf import OmegaConf

import ragbench.__main__ as entry
from ragbench import job as job_module
from ragbench.errors import ConfigError
from ragbench.job import Job
from ragbench.judge.lexical import LexicalJudge
from ragbench.tracking import store
from ragbench.tracking.full_disk import DiskFull, FullDiskGuard, disk_full, full_disk

RUN = "0123456789abcdef0123456789abcdef"


def sqlite_full() -> Exception:
    """What MLflow raises on a full disk: its exception, caused by SQLAlchemy's, caused by sqlite's."""
    driver = sqlite3.OperationalError("database or disk is full")
    wrapped = RuntimeError("(sqlite3.OperationalError) database or disk is full\n[SQL: INSERT INTO metrics ...]")
    wrapped.__cause__ = driver
    outer = Exception("TEMPORARILY_UNAVAILABLE")
    outer.__cause__ = wrapped
    return outer


@pytest.mark.parametrize(("exc", "full"), [
    (OSError(errno.ENOSPC, "No space left on device", "/x/y"), True),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), True),
    (sqlite_full(), True),
    (OSError("1014144 requested and 9184 written"), True),  # numpy's short write: no errno
    (OSError(errno.EACCES, "Permission denied", "/x"), False),
    (sqlite3.OperationalError("database is locked"), False),
    (ValueError("no"), False),
], ids=["enospc", "quota", "sqlite-full", "short-write", "eacces", "locked", "other"])
def test_what_counts_as_a_full_disk(exc, full):
    assert (full_disk(exc) is not None) == full


class FullClient:
    """An MlflowClient stand-in whose writes fail as ``fail`` says."""

    def __init__(self, fail: BaseException) -> None:
        self.fail = fail

    def log_batch(self, run_id: str, **kwargs: Any) -> None:
        raise self.fail

    def log_artifacts(self, run_id: str, folder: str, artifact_path: str | None = None) -> None:
        raise self.fail

    def get_run(self, run_id: str) -> str:
        return "a run"


def test_the_client_guard_names_the_store_the_run_and_the_free_space(tmp_path):
    guard = FullDiskGuard(FullClient(sqlite_full()), uri=f"sqlite:///{tmp_path}/mlflow.db",
                          artifact_root=str(tmp_path / "artifacts"))
    assert guard.get_run(RUN) == "a run"
    with pytest.raises(DiskFull) as info:
        guard.log_batch(RUN, metrics=[])
    full = info.value
    assert (full.what, full.path, full.run_id, full.key) == ("the MLflow store", tmp_path / "mlflow.db", RUN,
                                                           "tracking.uri")
    assert full.free is not None and full.free > 0
    line = full.line()
    assert line.startswith(f"no space left for the MLflow store {tmp_path}/mlflow.db (")
    assert "free there): database or disk is full; stopped at the first failed write" in line
    assert "fix: free space there, or point tracking.uri at a disk with room" in line and "\n" not in line
    upload = FullDiskGuard(FullClient(OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "a/f.json"))),
                           uri=f"sqlite:///{tmp_path}/mlflow.db", artifact_root=str(tmp_path / "a"))
    with pytest.raises(DiskFull) as info:
        upload.log_artifacts(RUN, "folder")
    assert info.value.what == "the MLflow artifacts" and info.value.key == "tracking.artifact_root"
    assert info.value.path == tmp_path / "a/f.json"
    import pickle

    again = pickle.loads(pickle.dumps(full))  # a launcher's worker process sends it back to the sweep
    assert (again.path, again.run_id, again.line()) == (full.path, full.run_id, full.line())
    other = FullDiskGuard(FullClient(ValueError("bad metric")), uri="sqlite:///x.db", artifact_root="a")
    with pytest.raises(ValueError):
        other.log_batch(RUN)  # any other error is the client's own


def test_mlflow_own_traceback_of_a_full_disk_is_not_logged(caplog):
    import logging

    FullDiskGuard(FullClient(ValueError()), uri="sqlite:///x.db", artifact_root="a")
    log = logging.getLogger("mlflow.store.db.utils")
    with caplog.at_level(logging.ERROR, logger="mlflow.store.db.utils"):
        for exc in (sqlite_full(), sqlite3.OperationalError("database is locked")):
            try:
                raise exc
            except Exception:
                log.exception("SQLAlchemy database error. The following exception is caught.")
    assert len(caplog.records) == 1 and "locked" in str(caplog.records[0].exc_info[1])


# ---- a job's run on a full disk -----------------------------------------------------------------------

class Tracker:
    """Job's tracker in memory; writes fail with DiskFull from the ``full_from`` write on, ``end_run``
    too when ``end_fails``."""

    def __init__(self, tmp: Path, *, full_from: str = "log_metrics", end_fails: bool = False) -> None:
        self.tmp, self.full_from, self.end_fails = tmp, full_from, end_fails
        self.ended: list[tuple[str, str]] = []

    def _write(self, what: str) -> None:
        if what == self.full_from:
            raise disk_full(sqlite_full(), what="the MLflow store", path=self.tmp / "mlflow.db",
                                  key="tracking.uri", run_id="run-1")  # type: ignore[misc]

    def close_stale_runs(self) -> list[str]:
        return []

    def finished_runs_of(self, job_hash: str) -> list[Any]:
        return []

    def runs_with_tag(self, key: str, value: str) -> list[Any]:  # no concurrent sweep (ragbench.tracking.claims)
        return []

    def start_run(self, **kwargs: Any) -> str:
        self._write("start_run")
        return "run-1"

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        self._write("log_params")

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        self._write("set_tags")

    def log_metrics(self, run_id: str, metrics: Mapping[str, float]) -> None:
        self._write("log_metrics")

    @contextlib.contextmanager
    def batched(self, run_id: str) -> Iterator[None]:
        yield

    def end_run(self, run_id: str, status: str) -> None:
        if self.end_fails:
            self._write(self.full_from)
        self.ended.append((run_id, status))


COMPONENTS = SimpleNamespace(generator=None, embedder=None, routes={}, judges={"lexical": LexicalJudge()})


@pytest.fixture(autouse=True)
def _no_git(monkeypatch):
    monkeypatch.setattr(job_module, "job_hash", lambda resolved: "h" * 16)
    monkeypatch.setattr("ragbench.job.start_tags", lambda cfg, components: {})


def _cfg(tmp: Path) -> Any:
    return OmegaConf.create({"objective": None, "resume": True, "cache": {"dir": str(tmp / "cache")},
                             "dataset": {"name": "d"}})


def _logs_metrics(job: Job, components: Any) -> Mapping[str, float]:
    job.tracker.log_metrics("run-1", {"answer/f1": 0.5})
    return {}


def _cache_full(job: Job, components: Any) -> Mapping[str, float]:
    raise OSError(errno.ENOSPC, "No space left on device", str(job.cfg.cache.dir) + "/chunks/abc")


# (case id, tracker settings, the job's work, the run's end (None: left RUNNING), what the line names)
CASES = [
    ("store-full-run-killed", {}, _logs_metrics, "KILLED", "the MLflow store"),
    ("store-full-cannot-even-close", {"end_fails": True}, _logs_metrics, None, "the MLflow store"),
    ("store-full-at-the-params", {"full_from": "log_params"}, _logs_metrics, "KILLED", "the MLflow store"),
    ("cache-full", {}, _cache_full, "KILLED", "the stage cache"),
]


@pytest.mark.parametrize("multirun", [True, False], ids=["sweep", "alone"])
@pytest.mark.parametrize(("settings", "work", "end", "what"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_full_disk_stops_the_job_with_its_run_killed_or_named(tmp_path, capsys, monkeypatch, multirun, settings,
                                                              work, end, what):
    monkeypatch.setattr("ragbench.interrupts.ignore", lambda: None)
    tracker = Tracker(tmp_path, **settings)
    job = Job(_cfg(tmp_path), tracker, name="#0 x", parent="p" if multirun else None,  # type: ignore[arg-type]
              multirun=multirun, folder=tmp_path / "record")
    with pytest.raises(DiskFull) as info:  # never a FAILED run and on to the next job: the sweep stops here
        job.run(work, COMPONENTS)  # type: ignore[arg-type]
    full = info.value
    assert tracker.ended == ([("run-1", end)] if end else [])
    assert (full.closed, full.left) == ((["run-1"], []) if end else ([], ["run-1"]))
    assert entry.stopped_by_full_disk(full) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"ragbench: no space left for {what} {tmp_path}")
    assert ("run run-1 ended KILLED" in err) == bool(end)
    assert ("run run-1 left RUNNING: the next run on this store closes it as KILLED" in err) == (not end)


# ---- a store file that sqlite cannot read --------------------------------------------------------------

def _store_with_runs(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("create table runs (run_uuid text, status text, payload text)")
    con.executemany("insert into runs values (?, 'FINISHED', ?)", [(str(i), "x" * 2000) for i in range(200)])
    con.commit()
    con.close()


def _cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garble_middle(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[4096:8192] = b"\xa5" * 4096  # the second page: a table b-tree page, not the header
    path.write_bytes(bytes(data))


def _not_sqlite(path: Path) -> None:
    path.write_bytes(b"this is a text file, not a database\n" * 10)


@pytest.mark.parametrize(("damage", "why"), [
    (_cut_in_half, "bytes where its header says"),
    (_garble_middle, "database disk image is malformed"),
    (_not_sqlite, "not an sqlite database"),
], ids=["truncated", "garbled-page", "not-sqlite"])
def test_a_damaged_store_file_is_one_line_naming_it_and_the_fix(tmp_path, damage, why):
    db = tmp_path / "mlflow.db"
    _store_with_runs(db)
    damage(db)
    with pytest.raises(ConfigError) as info:
        store.prepare(f"sqlite:///{db}")
    message = str(info.value)
    assert "\n" not in message and why in message, message
    assert message.startswith(f"tracking.uri=sqlite:///{db}: the store {db} is damaged (")
    assert f"fix: move it aside (mv {db} {db}.damaged) and rerun" in message and ".recover" in message


def test_a_full_disk_under_the_record_names_its_folder(tmp_path, monkeypatch):
    """A record write that finds no space stops the sweep like the store's, naming the job's record folder
    and the settings that move it (not the stage cache, which it is not)."""
    monkeypatch.setattr("ragbench.interrupts.ignore", lambda: None)
    tracker = Tracker(tmp_path, full_from="none")
    record = tmp_path / "out" / "record"
    job = Job(_cfg(tmp_path), tracker, name="#0", parent=None, multirun=False, folder=record)  # type: ignore[arg-type]

    def record_full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(record / "run.json"))

    monkeypatch.setattr("ragbench.record.RecordWriter.finish", record_full)
    with pytest.raises(DiskFull) as info:
        job.run(_logs_metrics, COMPONENTS)  # type: ignore[arg-type]
    line = info.value.line()
    assert line.startswith(f"no space left for the job's record {record}") and "point hydra.run.dir / hydra.sweep.dir at" in line
    assert tracker.ended == [("run-1", "KILLED")] and info.value.closed == ["run-1"]


# ---- which disk is full: the one the failed write was on ------------------------------------------------

def _write_full(job: Job, components: Any) -> Mapping[str, float]:
    raise OSError(errno.ENOSPC, "No space left on device")  # a write() call: the error names no file


def _room(monkeypatch, full: Path) -> None:
    """Every disk has 78.2 GB free but the one holding ``full``, which has none."""
    def free(path: Path) -> int:
        return 0 if Path(path).resolve().is_relative_to(full.resolve()) else 78_200_000_000

    monkeypatch.setattr("ragbench.tracking.full_disk.free_bytes", free)


def test_a_full_disk_under_the_output_folder_is_not_blamed_on_the_stage_cache(tmp_path, monkeypatch):
    """Issue 45.5: a full disk under the working folder was reported as "no space left for the stage cache ...
    (78.2 GB free there) ... point cache.dir at a disk with room"."""
    monkeypatch.setattr("ragbench.interrupts.ignore", lambda: None)
    out = tmp_path / "multirun" / "0"
    _room(monkeypatch, out)
    tracker = Tracker(tmp_path, full_from="none")
    job = Job(_cfg(tmp_path), tracker, name="#0", parent="p", multirun=True,  # type: ignore[arg-type]
              folder=out / "record")
    with pytest.raises(DiskFull) as info:
        job.run(_write_full, COMPONENTS)  # type: ignore[arg-type]
    line = info.value.line()
    assert line.startswith(f"no space left for the job's output folder {out} (0 bytes free there)"), line
    assert "point hydra.run.dir / hydra.sweep.dir at a disk with room" in line and "cache.dir" not in line


@pytest.mark.parametrize(("failed", "what", "key"), [
    ("cache/chunks/abc.json", "the stage cache", "cache.dir"),  # the file the write named: in the cache
    ("multirun/0/record/cases.jsonl", "the job's output folder", "hydra.run.dir / hydra.sweep.dir"),
    ("elsewhere/x.bin", "the file", None),  # in none of the job's folders: that file's disk, no setting
])
def test_a_write_that_names_its_file_is_blamed_on_that_files_disk(tmp_path, monkeypatch, failed, what, key):
    import tempfile

    from ragbench.tracking.full_disk import job_places, where_full

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # pytest's tmp_path is under the system's
    path = tmp_path / failed
    _room(monkeypatch, path.parent)
    full = where_full(OSError(errno.ENOSPC, "No space left on device", str(path)),
                      job_places(tmp_path / "cache", tmp_path / "multirun" / "0" / "record"))
    assert full is not None
    line = full.line()
    assert line.startswith(f"no space left for {what} {path} (0 bytes free there)"), line
    moved = f"point {key} at a disk with room" if key else "fix: free space there, then rerun"
    assert moved in line


# ---- a new store on a full disk --------------------------------------------------------------------------

def _half_copy(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
    Path(dst).write_bytes(b"SQLite format 3\x00" + b"\x00" * 500)  # what a copy cut off by the disk leaves
    err = OSError(errno.ENOSPC, "No space left on device")
    err.filename, err.filename2 = str(src), str(dst)  # as shutil's sendfile names them: the template first
    raise err


def _half_migrate(tmp: Path) -> None:
    tmp.write_bytes(b"SQLite format 3\x00")
    tmp.with_name(tmp.name + "-journal").write_bytes(b"j")
    raise RuntimeError("(sqlite3.OperationalError) database or disk is full [SQL: CREATE TABLE runs ...]")


@pytest.mark.parametrize("how", ["template-copy", "migration"])
def test_a_new_store_on_a_full_disk_is_one_line_and_leaves_nothing_behind(tmp_path, monkeypatch, how):
    """Issue 45.10: shutil.copyfile of the store template on a full disk was a traceback."""
    template = tmp_path / "templates" / "empty-x.db"
    template.parent.mkdir()
    template.write_bytes(b"SQLite format 3\x00" + b"\x00" * 4000)
    if how == "template-copy":
        monkeypatch.setattr(store, "_template", lambda: template)
        monkeypatch.setattr(store.shutil, "copyfile", _half_copy)
    else:
        monkeypatch.setattr(store, "_template", lambda: None)
        monkeypatch.setattr(store, "_migrate", _half_migrate)
    db = tmp_path / "work" / "mlruns" / "mlflow.db"
    with pytest.raises(ConfigError) as info:
        store.prepare(f"sqlite:///{db}")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"tracking.uri=sqlite:///{db}: no space left to create the store {db} (")
    assert "free on its disk" in message
    assert "point tracking.uri (and tracking.artifact_root) at a disk" in message
    assert str(template) not in message  # the template's disk is not the full one
    left = sorted(p.name for p in db.parent.iterdir() if not p.name.endswith(".lock"))
    assert left == []  # nothing half-written
