"""A local sqlite MLflow store that is never left half-made, and unwritable locations named in one line.

MLflow creates and migrates a fresh sqlite store in place, in dozens of steps. An interrupt part way
left a store on which every later run failed (``table datasets already exists``), and two processes
opening a fresh folder at once raced through the same migration. Here a missing store is built in a
temporary file under a file lock and moved into place with ``os.replace``, so the store file is either
absent or complete. A half-made store from before (no schema version, no runs) is set aside and rebuilt.
MLflow's migration runs once per user and schema: its result is kept empty (``template_dir``) and copied
for each new store (a file copy instead of seconds of migration steps in every new folder). A store file
sqlite cannot read (cut short, garbled) is one line naming it and the fix, before MLflow opens it; so is a
disk without room for a new store (its temp file removed).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from ragbench.errors import ConfigError
from ragbench.tracking.disk_space import free_bytes, full_disk, size_text

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


def schema_head() -> str:
    """The installed MLflow's schema revision: what a store (sqlite or a server's database) must be at."""
    return _head()


def _migrate(tmp: Path) -> None:
    """A new store at ``tmp``, made and migrated by MLflow itself (dozens of steps: seconds): its command
    ``mlflow db upgrade``, run in this process. Unlike opening a ``SqlAlchemyStore``, it keeps no engine in
    MLflow's per-process cache for the temp file's URI (dropping that one took a private attribute)."""
    from mlflow.db import upgrade

    tmp.unlink(missing_ok=True)
    upgrade.main([f"sqlite:///{tmp}"], standalone_mode=False)


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
    from filelock import FileLock

    try:
        folder.mkdir(parents=True, exist_ok=True)
        file = folder / f"empty-{_head()}.db"
        if not file.exists():
            with FileLock(f"{file}.lock", timeout=LOCK_TIMEOUT_S):
                if not file.exists():
                    _made(file, _migrate)
        return file if _schema_version(file) == (_head(), 0) else None
    except Exception as exc:  # noqa: BLE001 - no template (a full or read-only folder): migrate in place
        log.debug("no store template under %s (%s); migrating the store in place", folder, exc)
        return None


def _made(path: Path, make: Callable[[Path], object]) -> None:
    """``make(tmp)`` into a temp file beside ``path``, then moved into place; on any failure the temp file
    and sqlite's side files are removed, so nothing half-written is left behind."""
    tmp = path.with_name(f".{path.name}.creating-{os.getpid()}")
    try:
        make(tmp)
        os.replace(tmp, path)
    except BaseException:
        for left in (tmp, *(tmp.with_name(tmp.name + end) for end in ("-journal", "-wal", "-shm"))):
            with contextlib.suppress(OSError):
                left.unlink(missing_ok=True)
        raise


def _build(path: Path, uri: str) -> None:
    """Creates the store at ``path`` (a copy of the template, else migrated in a temp file beside it and
    moved into place). A disk without room for it is one line naming the disk and the fix."""
    template = _template()
    try:
        _made(path, functools.partial(shutil.copyfile, template) if template is not None else _migrate)
    except Exception as exc:
        if full_disk(exc) is None:
            raise
        free = size_text(free_bytes(path.parent))
        raise ConfigError(f"tracking.uri={uri}: no space left to create the store {path.resolve()} ({free} "
                          "free on its disk); nothing was left behind; fix: free space there, or point "
                          "tracking.uri (and tracking.artifact_root) at a disk with room") from None


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
            _prepare_locked(path, uri)
    except Timeout:
        raise ConfigError(f"tracking.uri={uri}: another process held {path}.lock for {LOCK_TIMEOUT_S:.0f} s while "
                          f"creating the store; fix: stop it, or delete the lock file if no ragbench runs") from None


def _prepare_locked(path: Path, uri: str) -> None:
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
    _build(path, uri)

