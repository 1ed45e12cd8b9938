"""A local sqlite MLflow store that is never left half-made, and unwritable locations named in one line.

MLflow creates and migrates a fresh sqlite store in place, in dozens of steps. An interrupt part way
left a store on which every later run failed (``table datasets already exists``), and two processes
opening a fresh folder at once raced through the same migration. Here a missing store is built in a
temporary file under a file lock and moved into place with ``os.replace``, so the store file is either
absent or complete. A half-made store from before (no schema version, no runs) is set aside and rebuilt.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path

from ragbench.errors import ConfigError

log = logging.getLogger(__name__)
LOCK_TIMEOUT_S = 300.0
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


def writable_folder(folder: Path, what: str, fix: str = FIX) -> None:
    """Creates ``folder`` if needed; a one-line ConfigError naming it when it cannot be written."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".ragbench-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"{what}: cannot write to {folder.resolve()} ({exc.strerror or exc}); fix: {fix}") from None


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


def _head() -> str:
    from mlflow.store.db.utils import _get_latest_schema_revision

    return str(_get_latest_schema_revision())


def _build(path: Path) -> None:
    """Creates and migrates a store in a temp file beside ``path``, then moves it into place."""
    from mlflow.store.tracking import DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    tmp = path.with_name(f".{path.name}.creating-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    uri = f"sqlite:///{tmp}"
    store = SqlAlchemyStore(uri, DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH)
    store.engine.dispose()
    SqlAlchemyStore._engine_map.pop(uri, None)  # noqa: SLF001 - that engine points at the temp file
    os.replace(tmp, path)


def prepare(uri: str) -> None:
    """Makes sure a sqlite store at ``uri`` exists, complete; other URIs are left to MLflow."""
    path = sqlite_path(uri)
    if path is None:
        return
    writable_folder(path.parent, f"tracking.uri={uri}")
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"tracking.uri={uri}: the store {path.resolve()} is read-only; fix: {FIX}")
    if path.exists() and path.stat().st_size and _schema_version(path)[0] == _head():
        return  # complete
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
