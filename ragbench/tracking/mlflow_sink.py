"""MLflow as one sink of a job's record (``ragbench.record``): params, tags, metrics, the record's files,
the case table and the dataset input.

Every tag the job sets on its run is the record's: its ``tags``, and its ``versions`` as the
``ragbench.env.*`` tags (``mlflow_tags``). What only MLflow holds is MLflow's own bookkeeping (docs/layout.md,
"A job's life"): its ``mlflow.*`` tags (source, user, parent run, run name, the list of tables),
``ragbench.owner`` (the process holding the run open, for closing stale runs), ``ragbench.record_folder``
(where its record is written, for a rerun to store one left there), the tags a later process puts
on a run it closes as stale, and the error of a record that could not be written or logged.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ragbench.errors import ConfigError, TrackingError
from ragbench.record import (
    CASES_ARTIFACT,
    ERROR_TAG,
    RUN_FILE,
    RecordError,
    RunRecord,
    StoredRecord,
    file_facts,
    folder_files,
    keep_pointer,
)
from ragbench.tracking.environment import environment_tags
from ragbench.tracking.store import sqlite_path
from ragbench.tracking.traces import log_job_traces

if TYPE_CHECKING:
    from ragbench.tracking.mlflow_tracker import MlflowTracker


log = logging.getLogger(__name__)
FOLDER_TAG = "ragbench.record_folder"  # host:path of a job's record folder (ragbench.tracking.kept)


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts -> dotted keys; lists are kept as JSON text."""
    out: dict[str, Any] = {}
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    if isinstance(obj, list):
        if all(isinstance(v, Mapping) for v in obj) and obj:
            for i, v in enumerate(obj):
                out.update(flatten(v, f"{prefix}{i}."))
            return out
        return {prefix[:-1]: json.dumps(obj, indent=2, sort_keys=True, default=str, ensure_ascii=False).replace("\n", "").replace("  ", "")}
    return {prefix[:-1]: obj}


CASE_TABLE = "cases_table.json"  # the cases as an MLflow table (the UI's artifact view and evaluation tab)


def start_params(record: RunRecord) -> dict[str, Any]:
    """A run's params: its resolved config as dotted keys, and the components' own (prompt hashes)."""
    return {**flatten(dict(record.config)), **record.params}


def mlflow_tags(record: RunRecord) -> dict[str, str]:
    """The tags of ``record``'s run: the environment (``ragbench.env.<name>`` per ``versions`` entry) and ``tags``."""
    return {**environment_tags(record.versions), **record.tags}


def open_run(tracker: MlflowTracker, record: RunRecord, *, parent: str | None,
             folder: Path | None = None) -> str:
    """The record's MLflow run, RUNNING, created with the record's tags so far and, given the record's
    ``folder``, ``ragbench.record_folder`` (where a rerun finds a record this run could not store:
    ``ragbench.tracking.kept``); returns its id."""
    where = {} if folder is None else {FOLDER_TAG: f"{socket.gethostname()}:{folder.resolve()}"}
    tags = {**mlflow_tags(record), **where}
    return tracker.start_run(run_name=record.name, parent_run_id=parent, tags=tags)


def log_failure(tracker: MlflowTracker, run_id: str, record: RunRecord, *, scored: bool,
                sink_error: str | None = None) -> None:
    """A failed job's end from its record: its tags (``ragbench.error`` among them) and, when the job failed
    before its results were logged (``scored`` false), its metrics: the zero answer scores
    (``ragbench.record.failed``). ``sink_error``: why the record itself was not written or logged, tagged
    when the record names no error (it cannot hold that one). A server gone by then is one warning: the
    job's error is said already, its record stays in its folder for the rerun (``ragbench.tracking.kept``)."""
    tags = {**({ERROR_TAG: sink_error} if sink_error else {}), **record.tags}
    try:
        with tracker.batched(run_id):
            tracker.set_tags(run_id, tags)
            if not scored and record.metrics:
                tracker.log_metrics(run_id, record.metrics)
    except TrackingError as exc:
        log.warning("%s", exc)


def log_results(tracker: MlflowTracker, run_id: str, record: RunRecord, *,
                table: Sequence[Mapping[str, Any]]) -> None:
    """A finished pipeline's results into the job's MLflow run: the record's tags, metrics and curves (one
    batch), the cases as an MLflow table, and the dataset as the run's input. The record's files follow
    when the job ends (``log_files``); its config is ``run.json``'s and the params (no ``config.yaml``)."""
    with tracker.batched(run_id):  # tags, metrics and curves in as few store writes as fit
        tracker.set_tags(run_id, record.tags)
        tracker.log_metrics(run_id, record.metrics)
        tracker.log_curves(run_id, record.curves)
    tracker.log_table(run_id, [{k: (json.dumps(v, default=str, ensure_ascii=False) if isinstance(v, list) else v)
                                for k, v in row.items()} for row in table], CASE_TABLE)
    digest = record.fingerprints.get("dataset_sha256", "")
    tracker.log_dataset(
        run_id, name=f"{record.dataset}-{record.variant}", digest=digest, source=record.dataset_source,
        rows=[{k: row[k] for k in ("qid", "question", "question_type", "answerable")} for row in table],
        tags={"documents": str(record.counts.get("documents", 0)), "chunks": str(record.counts.get("chunks", 0)),
              "queries": str(record.counts.get("queries", 0)),
              **{f"queries/{t}": str(n) for t, n in sorted(record.queries_by_type.items())}},
    )


def log_files(tracker: MlflowTracker, run_id: str, folder: Path) -> None:
    """The record's files as they are (``run.json``, ``cases.jsonl``) into the run's artifact store, whatever
    way the job ended; once the store holds each at the size written, the folder keeps only a pointer to
    them (``record.keep_pointer``): each file is stored once. A store that holds less raises (the folder's
    files stay: they are then the only copy). Before the pointer, the cases become MLflow traces as
    ``tracking.traces`` says (``ragbench.tracking.traces.log_job_traces``)."""
    facts = file_facts(folder)
    try:
        tracker.log_folder(run_id, folder)
    except TrackingError as exc:
        raise TrackingError(f"{exc} (the record stays in {folder})") from None
    artifact_uri, held = tracker.stored_files(run_id)
    for name, f in facts.items():
        if name not in held:
            raise RecordError(f"the artifact store of run {run_id} does not list {name} after its upload; "
                              f"the record stays in {folder}")
        if held[name] is not None and held[name] != f["bytes"]:  # None: a store that gives no sizes
            raise RecordError(f"the artifact store of run {run_id} holds {name} at {held[name]} bytes, not "
                              f"the {f['bytes']} written; the record stays in {folder}")
    log_job_traces(tracker, run_id, folder)  # a trace per case (tracking.traces), from the files still here
    keep_pointer(folder, StoredRecord(run_id=run_id, tracking_uri=public_uri(tracker.uri),
                                      artifact_uri=artifact_uri, files=facts))


def public_uri(uri: str) -> str:
    """A tracking URI as a pointer keeps it: a relative sqlite path made absolute (the folder is read from
    anywhere), a server's user and password left out."""
    path = sqlite_path(uri)
    if path is not None:
        return f"sqlite:///{path.resolve()}"
    parts = urlsplit(uri)
    if parts.password is None and parts.username is None:
        return uri
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


@contextlib.contextmanager
def quiet_downloads() -> Iterator[None]:
    """No MLflow download progress bar per artifact (one per run would fill a sweep's log)."""
    key = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    before = os.environ.get(key)
    os.environ[key] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def fetch_stored(pointer: StoredRecord, name: str, *, tracking_uri: str | None = None) -> bytes:
    """One record file a pointer names, from its run's artifact store (``tracking_uri``: where that store
    is now, when it moved); a ConfigError naming the store and the run when it cannot be read."""
    uri = tracking_uri or pointer.tracking_uri
    db = sqlite_path(uri)
    if db is not None and not db.exists():
        raise ConfigError(f"no MLflow store at {db}, where run {pointer.run_id}'s record is stored; fix: pass "
                          "the store's tracking uri (it holds the record's files)")
    from mlflow import MlflowClient  # deferred: keeps MLflow out of ``import ragbench``

    with tempfile.TemporaryDirectory(prefix="ragbench-record-") as tmp, quiet_downloads():
        try:
            return Path(MlflowClient(tracking_uri=uri).download_artifacts(pointer.run_id, name, tmp)).read_bytes()
        except Exception as exc:  # noqa: BLE001 - any store or transport error: named in one line
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ConfigError(f"run {pointer.run_id} in {uri}: {name} not readable ({first[:160]}); fix: pass "
                              "the store's tracking uri") from None


def output_files(folder: Path, *, tracking_uri: str | None = None) -> dict[str, bytes]:
    """The record files (``run.json``, ``cases.jsonl``) of a job's output record folder
    (``<hydra output dir>/record``), whatever its layout (``record.folder_files``): read through the artifact
    store when the folder keeps a pointer (``tracking_uri``: the store's, when it moved)."""
    return folder_files(folder, lambda p, name: fetch_stored(p, name, tracking_uri=tracking_uri))


def output_record(folder: Path, *, tracking_uri: str | None = None) -> tuple[RunRecord, bytes]:
    """(the ``RunRecord``, the ``cases.jsonl`` bytes) of a job's output record folder (``output_files``)."""
    files = output_files(folder, tracking_uri=tracking_uri)
    return RunRecord.from_json(files[RUN_FILE]), files.get(CASES_ARTIFACT, b"")
