"""MLflow side of a job: one run with params, tags, batched metrics, artifacts and the case table."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

from ragbench import session
from ragbench.errors import ConfigError, TrackingError
from ragbench.gc_tuning import long_lived
from ragbench.record import REUSED_FROM
from ragbench.redact import is_secret_key, redact_objs
from ragbench.redact import redact as redact_text
from ragbench.tracking import kept, reach, store
from ragbench.tracking.environment import source_tags
from ragbench.tracking.full_disk import FullDiskGuard
from ragbench.tracking.owner import OWNER_TAG, owner, owner_gone
from ragbench.tracking.traces import check_mode

log = logging.getLogger(__name__)

_BAD_NAME = re.compile(r"[^A-Za-z0-9_\-.:/ ]")
# MLflow 3's UI opens an experiment of this kind on its training runs, not on the GenAI traces overview.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
MAX_PARAM_LEN = 6000
LOGGED_ARTIFACTS = "mlflow.loggedArtifacts"  # the tag MLflow lists a run's tables in (mlflow.utils.mlflow_tags)
NOTE = "mlflow.note.content"
GONE = ("Max retries exceeded", "Connection refused", "Connection aborted")  # no server answered a request  # the run's description in MLflow's UI (markdown)


def mlflow_name(key: str) -> str:
    """A valid MLflow metric/param name."""
    return _BAD_NAME.sub("_", key)


def redact(params: Mapping[str, Any]) -> dict[str, str]:
    """Stringified params with anything named like a secret masked (env var *names* are kept)."""
    out = {}
    for key, value in params.items():
        if is_secret_key(key) and value not in (None, ""):
            value = "***"
        text = "" if value is None else redact_text(str(value))
        out[mlflow_name(key)] = text[:MAX_PARAM_LEN]
    return out


@dataclass
class _Stores:
    """The stores the session opened: a client per tracking URI (each new client re-opens and re-checks the
    store), and each experiment's id by (URI, name): a cache of ``ragbench.session``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    clients: dict[str, Any] = field(default_factory=dict)
    experiment_ids: dict[tuple[str, str], str] = field(default_factory=dict)


def _stores() -> _Stores:
    return session.current().caches.slot(__name__, _Stores)


def client_for(uri: str, connect_timeout_s: float = reach.CONNECT_TIMEOUT_S, *,
               key: str = "tracking.uri") -> Any:
    """One MlflowClient per store and session: each new client re-opens and re-checks the store. A server or
    database that does not answer within ``connect_timeout_s`` is one line (``ragbench.tracking.reach``)."""
    stores = _stores()
    with stores.lock:
        if uri not in stores.clients:
            reach.check(uri, connect_timeout_s, key=key)
            store.prepare(uri)  # a sqlite store is created whole (under a lock) or named in a one-line error
            with long_lived():  # MLflow's modules and SQLAlchemy's mappers live as long as the process
                from mlflow import MlflowClient

                stores.clients[uri] = MlflowClient(tracking_uri=uri)  # opens (or creates, migrates) the store
        return stores.clients[uri]


# the unique-key error of a dataset row two processes inserted at once: sqlite's, PostgreSQL's (a team server)
DATASET_RACE = ("UNIQUE constraint failed: datasets", 'unique constraint "dataset_pk"')


class MlflowTracker:
    """Talks to MLflow through ``MlflowClient`` only (no global active run), so parallel jobs and the
    sweep callback never step on each other's state."""

    def __init__(self, *, uri: str = "sqlite:///mlruns/mlflow.db", artifact_root: str = "mlruns/artifacts",
                 experiment: str = "ragbench", connect_timeout_s: float = reach.CONNECT_TIMEOUT_S,
                 traces: str = "auto") -> None:
        if not uri:
            raise ConfigError("tracking.uri is empty; use e.g. sqlite:///mlruns/mlflow.db or http://host:5000")
        self.uri = uri
        self.artifact_root = artifact_root
        self.experiment = experiment
        self.connect_timeout_s = connect_timeout_s
        self.traces = check_mode(traces)  # a trace per case at a job's end (ragbench.tracking.traces)
        self._client: Any = None
        self._pending: dict[str, tuple[list[Any], list[Any], list[Any]]] = {}  # see batched()
        self._tables: dict[str, list[str]] = {}  # run id -> the tables logged to it (log_table)

    @property
    def client(self) -> Any:
        if self._client is None:
            if store.sqlite_path(self.uri) is not None:
                store.writable_folder(Path(self.artifact_root), f"tracking.artifact_root={self.artifact_root}")
            # a full disk stops at the first failed write (interrupts wait for a safe point: ragbench.interrupts)
            self._client = FullDiskGuard(client_for(self.uri, self.connect_timeout_s), uri=self.uri,
                                         artifact_root=self.artifact_root)
        return self._client

    def experiment_id(self) -> str:
        """The experiment's id, created (with artifacts under ``artifact_root``) when missing; looked up
        once per store and session (every job of a sweep asks for it two or three times)."""
        key, ids = (self.uri, self.experiment), _stores().experiment_ids
        if key not in ids:
            ids[key] = self._experiment_id()
        return ids[key]

    def _experiment_id(self) -> str:
        exp = self.client.get_experiment_by_name(self.experiment)
        if exp is not None:
            if not set(EXPERIMENT_KIND.items()) <= set(exp.tags.items()):  # made by an older ragbench or by hand
                self._set_kind(str(exp.experiment_id))
            return str(exp.experiment_id)
        location = None
        if self.uri.startswith("sqlite:") or self.uri.startswith("file:"):
            location = (Path(self.artifact_root).resolve() / self.experiment).as_uri()
        try:
            return str(self.client.create_experiment(self.experiment, artifact_location=location,
                                                     tags=EXPERIMENT_KIND))
        except Exception:
            exp = self.client.get_experiment_by_name(self.experiment)
            if exp is None:
                raise
            return str(exp.experiment_id)

    def _set_kind(self, experiment_id: str) -> None:
        for key, value in EXPERIMENT_KIND.items():
            self.client.set_experiment_tag(experiment_id, key, value)

    def start_run(self, *, run_name: str, tags: Mapping[str, str], parent_run_id: str | None = None,
                  start_time: int | None = None) -> str:
        """A new RUNNING run, with MLflow's standard source tags (commit, entry point, user); returns its id."""
        return str(self._create(run_name=run_name, tags=tags, parent_run_id=parent_run_id,
                                start_time=start_time).info.run_id)

    def _create(self, *, run_name: str, tags: Mapping[str, str], parent_run_id: str | None,
                start_time: int | None) -> Any:
        all_tags = {**source_tags(), **{k: redact_text(str(v)) for k, v in tags.items()}}
        all_tags[OWNER_TAG] = owner()
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        return self.client.create_run(self.experiment_id(), run_name=redact_text(run_name), tags=all_tags,
                                      start_time=start_time)

    def copy_run(self, source: Any, *, run_name: str, parent_run_id: str | None, tags: Mapping[str, str]) -> str:
        """A FINISHED copy of ``source`` under another parent that looks like the run it stands for (the
        source is not touched): its params, metrics with their history (a curve's every step), ragbench tags
        and table list, dataset inputs, artifacts (the record, the case table, the config), start and end
        times, and a note linking to the run that ran the job. ``tags`` name the copy (job number,
        overrides, origin). A copy made by an older ragbench (params, metrics, tags) is copied from its
        origin."""
        from mlflow.entities import Metric

        origin_id = str(tags.get(REUSED_FROM) or source.info.run_id)
        if origin_id != source.info.run_id:
            with contextlib.suppress(Exception):  # deleted since: the copy at hand stands in for it
                source = self.client.get_run(origin_id)
        kept = {k: v for k, v in source.data.tags.items()
                if (not k.startswith("mlflow.") or k == LOGGED_ARTIFACTS) and k != OWNER_TAG}
        note = (f"A copy (resume=true) of run [{origin_id}](#/experiments/{source.info.experiment_id}/runs/"
                f"{origin_id}), which ran this job: its results, artifacts and times.")
        copy = self._create(run_name=run_name, parent_run_id=parent_run_id, start_time=source.info.start_time,
                            tags={**kept, NOTE: note, **tags})
        run_id = str(copy.info.run_id)
        series = {m.key for m in source.data.to_proto().metrics if m.step != 0}  # curves: k as the step
        points = [Metric(m.key, m.value, m.timestamp, m.step) for m in source.data.to_proto().metrics
                  if m.key not in series]
        for key in sorted(series):
            points += self.client.get_metric_history(source.info.run_id, key)
        self.log_params(run_id, source.data.params)
        self._write(run_id, metrics=points)
        if source.inputs is not None and source.inputs.dataset_inputs:
            self._log_inputs(run_id, list(source.inputs.dataset_inputs))
        self._copy_artifacts(source, copy)
        self.end_run(run_id, "FINISHED", end_time=source.info.end_time)
        return run_id

    def _copy_artifacts(self, source: Any, copy: Any) -> None:
        """``source``'s artifacts into ``copy``'s: hard links between local folders (no second copy on disk),
        else downloaded and uploaded."""
        src, dst = _local(source.info.artifact_uri), _local(copy.info.artifact_uri)
        if src is not None and dst is not None:
            if src.is_dir():
                shutil.copytree(src, dst, copy_function=_link_or_copy, dirs_exist_ok=True)
            return
        if not self.client.list_artifacts(source.info.run_id):
            return
        with tempfile.TemporaryDirectory(prefix="ragbench-copy-") as tmp:
            files = self.client.download_artifacts(source.info.run_id, "", tmp)
            self.client.log_artifacts(copy.info.run_id, files)

    def finished_runs_of(self, job_hash: str) -> list[Any]:
        """The FINISHED runs of one job (tag ``ragbench.job_hash``), newest first. Its RUNNING runs whose
        process is gone (interrupted, killed) are closed as KILLED and tagged replaced; those of a live process
        (a concurrent sweep) finish on their own."""
        prior = self.runs_with_tag("ragbench.job_hash", job_hash)
        for stale in (r for r in prior if r.info.status == "RUNNING"):
            if owner_gone(stale.data.tags.get(OWNER_TAG)) is False:
                continue
            log.warning("closing interrupted run %s of this job as KILLED; it is replaced", stale.info.run_id)
            kept.store_kept(self, stale)  # its record, where its folder on this host kept it
            self.set_tags(stale.info.run_id, {"ragbench.replaced": "true"})
            self.end_run(stale.info.run_id, "KILLED")
        for ended in (r for r in prior if r.info.status in ("FAILED", "KILLED")):
            kept.store_kept(self, ended)  # a record its folder kept when its upload failed
        return [r for r in prior if r.info.status == "FINISHED"]

    def close_stale_runs(self) -> list[str]:
        """Closes as KILLED the RUNNING runs whose owning process is verifiably gone (kill -9, OOM);
        runs of live processes (a concurrent sweep) and of other hosts are left alone."""
        running = self.client.search_runs([self.experiment_id()], filter_string="attributes.status = 'RUNNING'",
                                          max_results=5000)
        closed = []
        for run in running:
            if owner_gone(run.data.tags.get(OWNER_TAG)):
                kept.store_kept(self, run)  # its record, where its folder on this host kept it
                self.set_tags(run.info.run_id, {"ragbench.closed_stale_by": owner()})
                self.end_run(run.info.run_id, "KILLED")
                closed.append(str(run.info.run_id))
        if closed:
            log.warning("closed %d run(s) left RUNNING by a process that is gone (kill -9?) as KILLED: %s",
                        len(closed), ", ".join(closed))
        return closed

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        self._write(run_id, params=[Param(k, v) for k, v in sorted(redact(params).items())])

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        from mlflow.entities import RunTag

        self._write(run_id, tags=[RunTag(mlflow_name(k), redact_text(str(v))[:5000]) for k, v in tags.items()])

    def log_metrics(self, run_id: str, metrics: Mapping[str, float], step: int = 0) -> None:
        """All metrics in a few ``log_batch`` calls (single calls run at ~100/s on sqlite)."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self._write(run_id, metrics=[Metric(mlflow_name(k), float(v), now, step) for k, v in sorted(metrics.items())])

    def log_curves(self, run_id: str, curves: Mapping[str, Mapping[int, float]]) -> None:
        """Metric series with their x as MLflow's step (``retrieval/recall_at_k_curve`` at k = 1, 3, 5, ...),
        so the UI draws each as a line chart rather than a single bar."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self._write(run_id, metrics=[Metric(mlflow_name(k), float(v), now, int(step))
                                     for k, series in sorted(curves.items()) for step, v in sorted(series.items())])

    @contextlib.contextmanager
    def batched(self, run_id: str) -> Iterator[None]:
        """Params, tags and metrics of ``run_id`` logged inside are written together on the way out (also
        when the body raises): one ``log_batch`` where MLflow's limits allow (it splits what does not fit:
        100 params, 100 tags, 1,000 entities a call), instead of one or more per call. Each store write
        costs a transaction and a run lookup; the values written are the same."""
        pending = self._pending.setdefault(run_id, ([], [], []))
        try:
            yield
        finally:
            if self._pending.get(run_id) is pending:
                del self._pending[run_id]
                params, tags, metrics = pending
                with self._reaching(run_id, "its params, tags and metrics"):
                    self.client.log_batch(run_id, params=params, tags=tags, metrics=metrics, synchronous=True)

    def _write(self, run_id: str, *, params: Sequence[Any] = (), tags: Sequence[Any] = (),
               metrics: Sequence[Any] = ()) -> None:
        """One ``log_batch`` now (MLflow splits it at its limits), or queued inside ``batched(run_id)``."""
        if run_id in self._pending:
            for queue, items in zip(self._pending[run_id], (params, tags, metrics), strict=True):
                queue.extend(items)
            return
        with self._reaching(run_id, "its params, tags and metrics"):
            self.client.log_batch(run_id, params=list(params), tags=list(tags), metrics=list(metrics),
                                  synchronous=True)

    def log_files(self, run_id: str, files: Mapping[str, str | bytes], artifact_path: str | None = None, *,
                  redacted: bool = False) -> None:
        """Writes ``name -> content`` into a temp folder and uploads it as artifacts; text is redacted
        unless the caller built it from redacted values (``redacted=True``, the case table)."""
        with tempfile.TemporaryDirectory(prefix="ragbench-artifacts-") as tmp:
            for name, content in files.items():
                p = Path(tmp) / name
                p.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(content, bytes):
                    data = content
                    try:
                        content = data.decode("utf-8")
                    except UnicodeDecodeError:
                        p.write_bytes(data)
                        continue
                p.write_text(content if redacted else redact_text(content), encoding="utf-8")
            self._upload(run_id, tmp, artifact_path, sorted(files))

    def log_table(self, run_id: str, rows: Sequence[Mapping[str, Any]], artifact_file: str) -> None:
        """Rows as an MLflow table (shown in the UI's artifact view and the evaluation tab): the file
        ``table_json`` writes and the ``mlflow.loggedArtifacts`` tag that lists it."""
        self.log_files(run_id, {artifact_file: table_json(rows)}, redacted=True)
        self._list_tables(run_id, [artifact_file])

    def log_folder(self, run_id: str, folder: Path, *, tables: Sequence[str] = ()) -> None:
        """Uploads a folder of finished artifact files as they are (a job's record: written from redacted
        values); ``tables`` are those of them that are MLflow tables (``table_json``)."""
        self._upload(run_id, str(folder), None, sorted(p.name for p in folder.iterdir()))
        if tables:
            self._list_tables(run_id, tables)

    def _upload(self, run_id: str, folder: str, artifact_path: str | None, names: Sequence[str]) -> None:
        """``log_artifacts``; an upload the artifact store refuses (not a full disk: ``FullDiskGuard``) is a
        one-line TrackingError naming the run, the files and the fix."""
        from mlflow.exceptions import MlflowException

        try:
            self.client.log_artifacts(run_id, folder, artifact_path=artifact_path)
        except (MlflowException, OSError) as exc:
            raise TrackingError(f"run {run_id}: the artifact store of {reach.public_uri(self.uri)} did not "
                                f"take {', '.join(names)} ({upload_reason(exc)}); fix: check the server's "
                                "artifact destination (space, permissions) and its log, then rerun the same "
                                "command") from None

    def stored_files(self, run_id: str) -> tuple[str, dict[str, int | None]]:
        """(the run's artifact URI, each top-level artifact file's size as the store holds it; None where the
        store does not say)."""
        uri = str(self.client.get_run(run_id).info.artifact_uri)
        return uri, {f.path: None if f.file_size is None else int(f.file_size)
                     for f in self.client.list_artifacts(run_id) if not f.is_dir}

    def _list_tables(self, run_id: str, names: Sequence[str]) -> None:
        """The ``mlflow.loggedArtifacts`` tag with every table logged to the run (the UI's "View as table")."""
        tables = self._tables.setdefault(run_id, [])
        tables.extend(n for n in names if n not in tables)
        self.set_tags(run_id, {LOGGED_ARTIFACTS: json.dumps([{"path": t, "type": "table"} for t in tables])})

    def log_dataset(self, run_id: str, *, name: str, digest: str, source: str,
                    rows: Sequence[Mapping[str, Any]], tags: Mapping[str, str]) -> None:
        """The dataset as a run input (``mlflow.data``): name, digest, and its questions as a frame."""
        import pandas as pd
        from mlflow.data.pandas_dataset import from_pandas
        from mlflow.entities import DatasetInput, InputTag

        with warnings.catch_warnings():  # a local path matches two equivalent source resolvers
            warnings.simplefilter("ignore", UserWarning)
            ds = from_pandas(pd.DataFrame(list(rows)), source=source, name=name, digest=digest[:36])
        inp = DatasetInput(ds._to_mlflow_entity(), tags=[InputTag(k, str(v)) for k, v in tags.items()])
        self._log_inputs(run_id, [inp])

    def _log_inputs(self, run_id: str, datasets: list[Any]) -> None:
        """``log_inputs``, once more when another process logged the same dataset at that moment: MLflow
        looks the row up, then inserts it, so of two jobs (a parallel launcher's, or sweeps sharing a team
        server) the slower hits the unique key. The row then exists, and the second call links it."""
        from mlflow.exceptions import MlflowException

        try:
            self.client.log_inputs(run_id, datasets=datasets)
        except MlflowException as exc:
            if not any(s in str(exc) for s in DATASET_RACE):
                raise
            self.client.log_inputs(run_id, datasets=datasets)

    def end_run(self, run_id: str, status: str, *, end_time: int | None = None) -> None:
        """FINISHED, FAILED or KILLED (at ``end_time``, ms since the epoch; default: now). A server that
        cannot be reached any more is one warning: the run stays RUNNING and the next sweep on this machine
        closes it (``close_stale_runs``), storing a record its folder kept (``ragbench.tracking.kept``)."""
        try:
            with self._reaching(run_id, f"its end ({status})"):
                if end_time is None:
                    self.client.set_terminated(run_id, status=status)
                else:
                    self.client.set_terminated(run_id, status=status, end_time=end_time)
        except TrackingError as exc:
            log.warning("%s", exc)

    @contextlib.contextmanager
    def _reaching(self, run_id: str, what: str) -> Iterator[None]:
        """A write that found no server (refused, reset, timed out: after MLflow's retries) as a one-line
        TrackingError; the server's own answers (a bad parameter) stay MLflow's."""
        from mlflow.exceptions import MlflowException

        try:
            yield
        except MlflowException as exc:
            if not any(s in str(exc) for s in GONE):
                raise
            raise TrackingError(f"run {run_id}: {what} did not reach {reach.public_uri(self.uri)} "
                                f"({upload_reason(exc)}); fix: check that the tracking server is up and "
                                "reachable, then rerun the same command") from None

    def runs_with_tag(self, key: str, value: str) -> list[Any]:
        """Runs of this experiment whose tag ``key`` equals ``value``, newest first."""
        return list(self.client.search_runs(
            [self.experiment_id()], filter_string=f"tags.`{key}` = '{value}'", max_results=100,
            order_by=["attributes.start_time DESC"],
        ))

    def search_children(self, parent_run_id: str) -> list[Any]:
        """Runs whose parent is ``parent_run_id``."""
        return list(self.client.search_runs(
            [self.experiment_id()], filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}'",
            max_results=5000,
        ))


def upload_reason(exc: BaseException) -> str:
    """Why an upload failed, short: the HTTP status, else what the connection died of."""
    text = " ".join(str(exc).split())
    code = re.search(r"error code (\d{3})", text)
    if code:
        return f"HTTP {code.group(1)}"
    cause = re.search(r"Caused by (\w+)\(", text)
    if cause:
        errno_name = re.search(r"(\w+Error)\(\d+", text)
        return f"{cause.group(1)}: {errno_name.group(1)}" if errno_name else cause.group(1)
    return text[:160]


def _local(uri: str | None) -> Path | None:
    """The folder of a local artifact URI (``file:///...`` or a plain path), else None."""
    if not uri:
        return None
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(url2pathname(parsed.path))
    return Path(uri) if not parsed.scheme else None


def _link_or_copy(src: str, dst: str) -> object:
    """A hard link (the same bytes, no second copy), else a copy (another disk, no hard links there)."""
    try:
        os.link(src, dst)
    except OSError:
        return shutil.copy2(src, dst)
    return dst


def table_json(rows: Sequence[Mapping[str, Any]]) -> str:
    """Rows as the file ``MlflowClient.log_table`` writes -- pandas' ``orient="split"`` JSON, columns in
    first-seen order, null where a row lacks a column or holds NaN -- without a DataFrame, an artifact
    listing and a run read per table (~0.2 s a job); redacted. Numbers keep every digit (pandas rounds to 10)."""
    safe, untouched = redact_objs([dict(r) for r in rows])
    columns = list(dict.fromkeys(k for r in safe for k in r))
    data = [[_json_value(r.get(c)) for c in columns] for r in safe]
    text = json.dumps({"columns": columns, "data": data}, default=str, ensure_ascii=False, allow_nan=False)
    # untouched: plain JSON whose every string and key redact_objs checked (numbers hold no secret);
    # otherwise (a cell written by default=str, a key) the text goes through redaction as well
    return text if untouched else redact_text(text)


def _json_value(value: Any) -> Any:
    """A table cell as pandas' JSON writes it: a non-finite float is null (JSON has no NaN)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _json_value(v) for k, v in value.items()}
    return value


def dumps(obj: Any) -> str:
    """Stable JSON for artifacts."""
    return json.dumps(obj, indent=2, sort_keys=True, default=str, ensure_ascii=False)
