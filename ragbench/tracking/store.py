"""A local sqlite MLflow store that is never left half-made, and unwritable locations named in one line.

MLflow creates and migrates a fresh sqlite store in place, in dozens of steps. An interrupt part way
left a store on which every later run failed (``table datasets already exists``), and two processes
opening a fresh folder at once raced through the same migration. Here a missing store is built in a
temporary file under a file lock and moved into place with ``os.replace``, so the store file is either
absent or complete. A half-made store from before (no schema version, no runs) is set aside and rebuilt.
MLflow's migration runs once per user and schema: its result is kept empty (``template_dir``) and copied
for each new store (a file copy instead of seconds of migration steps in every new folder).
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragbench.errors import ConfigError

log = logging.getLogger(__name__)
LOCK_TIMEOUT_S = 300.0
TEMPLATES_ENV = "RAGBENCH_STORE_TEMPLATES"
FIX = "run from a writable folder, or point tracking.uri (and tracking.artifact_root) at one"
OUTPUT_FIX = ("run from a writable folder, or set hydra.run.dir (hydra.sweep.dir with -m), tracking.uri and "
              "tracking.artifact_root to writable paths")


def tracking_defaults() -> tuple[str, str]:
    """(tracking uri, experiment) exactly as a job resolves them: conf/tracking/mlflow.yaml (a relative
    sqlite path is relative to the working folder). For the commands that read runs: compare, verify."""
    from importlib import resources

    from omegaconf import OmegaConf

    conf = OmegaConf.load(str(resources.files("ragbench.conf").joinpath("tracking/mlflow.yaml")))
    return str(conf.uri), str(conf.experiment)


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else None (a server or another database)."""
    if not uri.startswith("sqlite:///"):
        return None
    rest = uri[len("sqlite:///"):].split("?", 1)[0]
    return Path(rest) if rest and rest != ":memory:" else None


def os_reason(path: Path, exc: OSError) -> str:
    """Why ``path`` could not be written, in words: a parent that is a file, else the system's reason."""
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                return f"{parent} is a file, not a folder"
            break
    return exc.strerror or str(exc)


def writable_folder(folder: Path, what: str, fix: str = FIX) -> None:
    """Creates ``folder`` if needed; a one-line ConfigError naming it when it cannot be written."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".ragbench-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"{what}: cannot write to {folder.resolve()} ({os_reason(folder / '-', exc)}); "
                          f"fix: {fix}") from None


def damaged(path: Path, uri: str, why: str) -> ConfigError:
    """The one line for a store file sqlite cannot read: which file, and how to go on."""
    full = path.resolve()
    return ConfigError(f"tracking.uri={uri}: the store {full} is damaged ({why}); fix: move it aside "
                       f"(mv {full} {full}.damaged) and rerun, which starts a new store; the old one's runs can be "
                       f"salvaged with `sqlite3 {full}.damaged .recover | sqlite3 recovered.db`")


def _cut_short(path: Path) -> str | None:
    """Why a store file is shorter than its own header says (a copy or a disk cut off part way), else None.
    Reads the 100-byte sqlite header only: the file's size in pages is at offset 28, valid when the counter
    at 92 equals the change counter at 24 (sqlite.org/fileformat.html)."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(100)
    if len(head) < 100 or not head.startswith(b"SQLite format 3\x00"):
        return "not an sqlite database" if size else None
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    if head[24:28] == head[92:96] and pages * page > size:
        return f"{size:,} bytes where its header says {pages * page:,}: the file was cut short"
    return None


def _schema_version(path: Path) -> tuple[str | None, int]:
    """(alembic schema version or None, number of runs) of an existing store file."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
        version = None
        if "alembic_version" in tables:
            row = con.execute("select version_num from alembic_version").fetchone()
            version = row[0] if row else None
        runs = con.execute("select count(*) from runs").fetchone()[0] if "runs" in tables else 0
        return version, int(runs)
    finally:
        con.close()


@functools.lru_cache(maxsize=1)
def _head() -> str:
    """The installed MLflow's schema revision (alembic parses every migration script: once a process)."""
    from mlflow.store.db.utils import _get_latest_schema_revision

    return str(_get_latest_schema_revision())


def _migrate(tmp: Path) -> None:
    """A new store at ``tmp``, made and migrated by MLflow itself (dozens of steps: seconds)."""
    from mlflow.store.tracking import DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    tmp.unlink(missing_ok=True)
    uri = f"sqlite:///{tmp}"
    store = SqlAlchemyStore(uri, DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH)
    store.engine.dispose()
    SqlAlchemyStore._engine_map.pop(uri, None)  # noqa: SLF001 - that engine points at the temp file


def template_dir() -> Path | None:
    """Where the empty store of each MLflow schema is kept: ``$RAGBENCH_STORE_TEMPLATES``, else
    ``$XDG_CACHE_HOME/ragbench/mlflow-store`` (``~/.cache``); ``RAGBENCH_STORE_TEMPLATES=off``: none."""
    value = os.environ.get(TEMPLATES_ENV)
    if value is not None:
        return None if value in ("", "off", "0") else Path(value)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ragbench" / "mlflow-store"


def _template() -> Path | None:
    """An empty, complete store of the installed MLflow's schema, migrated once per user (under a lock)
    and copied for every new store after that; None where it cannot be kept (then each store migrates)."""
    folder = template_dir()
    if folder is None:
        return None
    from filelock import FileLock, Timeout

    try:
        folder.mkdir(parents=True, exist_ok=True)
        file = folder / f"empty-{_head()}.db"
        if not file.exists():
            with FileLock(f"{file}.lock", timeout=LOCK_TIMEOUT_S):
                if not file.exists():
                    tmp = file.with_name(f".{file.name}.creating-{os.getpid()}")
                    _migrate(tmp)
                    os.replace(tmp, file)
        return file if _schema_version(file) == (_head(), 0) else None
    except (OSError, sqlite3.Error, Timeout) as exc:
        log.debug("no store template under %s (%s); migrating the store in place", folder, exc)
        return None


def _build(path: Path) -> None:
    """Creates a store in a temp file beside ``path`` (a copy of the template, else migrated there),
    then moves it into place."""
    tmp = path.with_name(f".{path.name}.creating-{os.getpid()}")
    template = _template()
    if template is not None:
        shutil.copyfile(template, tmp)
    else:
        _migrate(tmp)
    os.replace(tmp, path)


def prepare(uri: str) -> None:
    """Makes sure a sqlite store at ``uri`` exists, complete; other URIs are left to MLflow."""
    path = sqlite_path(uri)
    if path is None:
        return
    writable_folder(path.parent, f"tracking.uri={uri}")
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"tracking.uri={uri}: the store {path.resolve()} is read-only; fix: {FIX}")
    if path.exists() and path.stat().st_size:
        why = _cut_short(path)
        if why is not None:
            raise damaged(path, uri, why)
        try:
            if _schema_version(path)[0] == _head():
                return  # complete
        except sqlite3.DatabaseError as exc:  # "database disk image is malformed", "file is not a database"
            raise damaged(path, uri, str(exc)) from None
    from filelock import FileLock, Timeout

    try:
        with FileLock(f"{path}.lock", timeout=LOCK_TIMEOUT_S):
            _prepare_locked(path)
    except Timeout:
        raise ConfigError(f"tracking.uri={uri}: another process held {path}.lock for {LOCK_TIMEOUT_S:.0f} s while "
                          f"creating the store; fix: stop it, or delete the lock file if no ragbench runs") from None


def _prepare_locked(path: Path) -> None:
    if path.exists() and path.stat().st_size:
        version, runs = _schema_version(path)
        if version == _head() or (version is not None and runs):
            return  # complete, or a store of an older MLflow: MLflow's to upgrade, with its own message
        if runs:
            raise ConfigError(f"tracking store {path.resolve()} holds {runs} runs but no schema version; fix: "
                              f"back it up and run `mlflow db upgrade sqlite:///{path.resolve()}`")
        aside = path.with_name(f"{path.name}.half-made-{int(time.time())}")
        os.replace(path, aside)
        log.warning("the tracking store %s was left half-made by an interrupted first run (no runs in it); "
                    "moved it to %s and built a new one", path, aside.name)
    _build(path)


# ---- a full disk ------------------------------------------------------------------------------------

# sqlite's SQLITE_FULL, the system's ENOSPC text, numpy's short write (np.save raises it without an errno)
_FULL_TEXT = re.compile(r"database or disk is full|No space left on device|\d+ requested and \d+ written")
_RUN_ID = re.compile(r"[0-9a-f]{32}")


def full_disk(exc: BaseException) -> BaseException | None:
    """The error in ``exc``'s chain that says a disk is full (ENOSPC, EDQUOT, sqlite "database or disk is
    full", a short write), else None."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno in (errno.ENOSPC, errno.EDQUOT):
            return cur
        if _FULL_TEXT.search(str(cur)):
            return cur
        cur = cur.__cause__ or cur.__context__
    return None


def free_bytes(path: Path) -> int | None:
    """Free bytes on the disk holding ``path`` (its nearest existing folder), None if unknown."""
    for folder in (path, *path.parents):
        if folder.exists():
            try:
                return shutil.disk_usage(folder).free
            except OSError:
                return None
    return None


def _size(n: int | None) -> str:
    if n is None:
        return "unknown"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _ids(runs: Sequence[str]) -> str:
    return ", ".join(r[:8] for r in runs)


class DiskFull(BaseException):
    """A write failed for want of space: the MLflow store, its artifacts, the stage cache. Not an
    ``Exception``: like an interrupt it must pass every ``except Exception`` on its way up (a job's failure
    handling, Hydra's, a callback's), because every later write and job would fail the same way. The job's
    run ends KILLED where the store still takes that (``ragbench.lifecycle``); ``__main__`` prints ``line()``
    and exits 1."""

    def __init__(self, *, what: str, path: Path, key: str, cause: str, run_id: str | None = None) -> None:
        self.what, self.path, self.key, self.cause, self.run_id = what, Path(os.path.abspath(path)), key, cause, run_id
        self.free = free_bytes(path)
        self.closed: list[str] = []  # runs ended KILLED on the way out
        self.left: list[str] = []  # runs the store would not even close: a later run closes them (stale)
        super().__init__(self.line())

    def line(self) -> str:
        """The one line: what is full, the free space, what became of the runs, and the fix."""
        closed, left = list(dict.fromkeys(self.closed)), list(dict.fromkeys(self.left))
        runs = f"; run {_ids(closed)} ended KILLED" if closed else ""
        if left:
            runs += (f"; run {_ids(left)} left RUNNING: the next run on this store closes "
                     f"{'it' if len(left) == 1 else 'them'} as KILLED")
        return (f"no space left for {self.what} {self.path} ({_size(self.free)} free there): {self.cause}; "
                f"stopped at the first failed write{runs}. fix: free space there, or point {self.key} at a disk "
                "with room, then rerun the same command: finished jobs are reused and the stage cache keeps "
                "what was built")


def disk_full(exc: BaseException, *, what: str, path: Path, key: str, run_id: str | None = None) -> DiskFull | None:
    """``exc`` as a DiskFull naming ``what`` at ``path`` (an OSError's own file, when it names one), or None
    when it is not a full disk."""
    cause = full_disk(exc)
    if cause is None:
        return None
    if isinstance(cause, OSError) and cause.filename:
        path = Path(str(cause.filename))
    match = _FULL_TEXT.search(str(cause))
    text = cause.strerror if isinstance(cause, OSError) and cause.strerror else match.group(0) if match else "full"
    return DiskFull(what=what, path=path, key=key, cause=text, run_id=run_id)


def _drop_full_disk(record: logging.LogRecord) -> bool:
    return not (record.exc_info and record.exc_info[1] is not None and full_disk(record.exc_info[1]))


@functools.lru_cache(maxsize=1)
def _quiet_mlflow_full_disk() -> None:
    """MLflow logs a database error with its traceback before it raises it; a full disk is reported once,
    as ``DiskFull``'s line, so that log record is dropped (every other one is kept)."""
    logging.getLogger("mlflow.store.db.utils").addFilter(_drop_full_disk)


class FullDiskGuard:
    """The MLflow client of one store, with a write that fails for want of space raised as ``DiskFull``
    naming the store (the sqlite file, or the artifact folder for an upload) and the run it was for."""

    def __init__(self, target: Any, *, uri: str, artifact_root: str) -> None:
        self._target, self._uri, self._artifacts = target, uri, artifact_root
        _quiet_mlflow_full_disk()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_target", "_uri", "_artifacts"):  # pickle's probes (launchers)
            raise AttributeError(name)
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except Exception as exc:
                run_id = next((a for a in args if isinstance(a, str) and _RUN_ID.fullmatch(a)), None)
                upload = name.startswith("log_artifact")
                db = sqlite_path(self._uri)
                full = disk_full(exc, what="the MLflow artifacts" if upload or db is None else "the MLflow store",
                                 path=Path(self._artifacts) if upload or db is None else db,
                                 key="tracking.artifact_root" if upload else "tracking.uri", run_id=run_id)
                if full is None:
                    raise
                raise full from exc

        return call

