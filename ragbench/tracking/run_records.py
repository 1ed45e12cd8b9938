"""The record (``ragbench.record``) of an MLflow run: MLflow finds the runs and shows them (id, name, start
time); what each job was and found -- its config, params, tags, status and metrics -- is read from its
``run.json``. The sweep table, the sweep's accounting, ``runs.csv`` and resume read runs here.

``record_of(client, run)`` is the one way from an MLflow run to its record: the ``run.json`` among the
artifacts of the run that ran the job (``cases_run_id``: the run itself, or the origin of a copy that
resume put in a later sweep), read by ``RunRecord.from_json``.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

from ragbench.embed.shard_entries import shard_stored
from ragbench.errors import ConfigError
from ragbench.record import RUN_FILE, RecordError, RunRecord, cases_run_id
from ragbench.stages import encode_only
from ragbench.tracking.mlflow_sink import quiet_downloads, start_params

log = logging.getLogger("ragbench")
RECORD_FIX = "fix: rerun the job with resume=false (its stage cache makes that cheap)"


def _named(run: Any) -> str:
    """``run <id> (<name>)``, and for a copy resume made, the run whose record it shows."""
    holder = cases_run_id(run)
    copy = f", a copy of run {holder}" if holder != str(run.info.run_id) else ""
    return f"run {run.info.run_id} ({run.info.run_name}{copy})"


def _local_folder(run: Any) -> Path | None:
    """The run's own artifact folder when the store keeps artifacts on this machine's disk, else None."""
    uri = str(getattr(run.info, "artifact_uri", "") or "")
    parsed = urlparse(uri)
    if not uri or parsed.scheme not in ("", "file"):
        return None
    return Path(url2pathname(parsed.path)) if parsed.scheme == "file" else Path(uri)


def record_of(client: Any, run: Any) -> RunRecord | None:
    """``run``'s record, from the ``run.json`` of the run that ran its job (``cases_run_id``); None when that
    run has no ``run.json`` (a job that ended before its record opened, or was logged before the record).
    A ``RecordError`` of one line naming the run, what is wrong (not readable, cut off, not a record, a
    field mistyped: ``RunRecord.from_json``) and the fix. Artifacts on this machine's disk are read in place
    (a copy's are hard links to its origin's: the same bytes), others through ``client`` (a server)."""
    holder = cases_run_id(run)
    local = _local_folder(run)
    if local is not None and ((local / RUN_FILE).is_file() or holder == str(run.info.run_id)):
        try:
            data = (local / RUN_FILE).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise RecordError(f"{_named(run)}: its {RUN_FILE} cannot be read ({exc.strerror}); "
                              f"{RECORD_FIX}") from None
        return _parsed(run, data)
    try:
        listed: set[str] | None = {f.path for f in client.list_artifacts(holder)}
    except Exception:  # noqa: BLE001 - any store or transport error: the download below names it
        listed = None
    if listed is not None and RUN_FILE not in listed:
        return None
    with tempfile.TemporaryDirectory(prefix="ragbench-record-") as tmp:
        try:
            with quiet_downloads():
                data = Path(client.download_artifacts(holder, RUN_FILE, dst_path=tmp)).read_bytes()
        except Exception as exc:  # noqa: BLE001 - any store or transport error: the record cannot be read
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise RecordError(f"{_named(run)}: its {RUN_FILE} cannot be read ({first}); "
                              f"{RECORD_FIX}") from None
    return _parsed(run, data)


def _parsed(run: Any, data: bytes) -> RunRecord:
    try:
        return RunRecord.from_json(data)
    except RecordError as exc:
        raise RecordError(f"{_named(run)}: {exc}; {RECORD_FIX}") from None


@dataclass(frozen=True)
class RecordedRun:
    """A run as the sweep shows it: MLflow's id and name, and its record (None: it has none).
    ``status`` is the record's, unless MLflow ended the run worse (the record could not be logged);
    ``problem``: why a run MLflow calls FINISHED counts as FAILED (its record missing or unreadable)."""

    run_id: str
    run_name: str
    status: str
    record: RunRecord | None
    problem: str | None = None
    params: Mapping[str, str] = field(default_factory=dict)  # the record's config and params: as the run's
    # MLflow params show them (``mlflow_sink.start_params``: dotted keys, values as text)

    @property
    def metrics(self) -> Mapping[str, float]:
        return self.record.metrics if self.record is not None else {}

    @property
    def tags(self) -> Mapping[str, str]:
        return self.record.tags if self.record is not None else {}


def _params(record: RunRecord | None) -> dict[str, str]:
    """The record's config and params as its MLflow run's params show them: text, None as ""."""
    if record is None:
        return {}
    return {k: "" if v is None else str(v) for k, v in start_params(record).items()}


def recorded(client: Any, runs: Iterable[Any]) -> list[RecordedRun]:
    """Each of ``runs`` with its record (``record_of``), in the order given. A FINISHED run whose record is
    missing or unreadable is FAILED here, its ``problem`` one line naming it; a run that ended otherwise
    without a record keeps its status (its job failed before the record opened, and said so)."""
    out = []
    for run in runs:
        status, problem = str(run.info.status), None
        try:
            record = record_of(client, run)
        except RecordError as exc:
            record, problem = None, str(exc)
        if record is None and problem is None and status == "FINISHED":
            problem = f"{_named(run)}: FINISHED in MLflow but has no {RUN_FILE} (record); {RECORD_FIX}"
        if record is not None and status == "FINISHED":
            status = record.status
        out.append(RecordedRun(run_id=str(run.info.run_id), run_name=str(run.info.run_name or ""),
                               status="FAILED" if problem else status, record=record, problem=problem,
                               params=_params(record)))
    return out


def read_all(client: Any, runs: Sequence[Any]) -> list[RecordedRun]:
    """``recorded``, where every run must have its record: a ``ConfigError`` naming the first that has not."""
    done = recorded(client, runs)
    bad = next((r.problem for r in done if r.problem), None)
    if bad:
        raise ConfigError(bad)
    return done


def resumable(client: Any, runs: Iterable[Any], job_hash: str, cache_dir: str | Path,
              seen: set[str] | None = None) -> tuple[Any, RunRecord] | None:
    """The first of ``runs`` (a job's FINISHED MLflow runs, newest first) whose record says it finished this
    job: readable, FINISHED, of ``job_hash`` -- and for a ``stages=encode`` job, its shard in the cache at
    ``cache_dir`` (resume follows the cache). A run whose record is missing, unreadable or says otherwise is
    passed over, with one line why (the job then runs again). A record is read once: the copies resume made
    of a run show its record. ``seen`` (the run ids already looked at, updated): a job that looks twice (once
    before its run opens, once after a contending run ends: ``ragbench.tracking.claims``) judges each run once."""
    seen = set() if seen is None else seen
    for run in runs:
        if cases_run_id(run) in seen:
            continue
        seen.add(cases_run_id(run))
        try:
            record = record_of(client, run)
        except RecordError as exc:
            log.warning("not resumed from it: %s", exc)
            continue
        if record is None:
            log.info("%s has no %s (record): not resumed from it", _named(run), RUN_FILE)
        elif record.status != "FINISHED" or record.job_hash != job_hash:
            why = f"status {record.status}" if record.status != "FINISHED" else f"job hash {record.job_hash}"
            log.warning("%s: its %s says %s, not this job finished: not resumed from it", _named(run),
                        RUN_FILE, why)
        elif not encode_only(record.tags) or shard_stored(cache_dir, record.tags, str(run.info.run_id)):
            return run, record
    return None
