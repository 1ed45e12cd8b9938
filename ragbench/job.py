"""One job's life, top to bottom: resume or start, run, record, end on every way out. The record
(``ragbench.record``) is written as the job goes; MLflow is its sink. Each way out ends the run:

    success                              FINISHED
    the budget stopped it (JobStopped)   KILLED   one line; NaN in a sweep, raised alone (exit 1)
    RagbenchError (config, data, LLM)    FAILED   tag ragbench.error, answer scores 0 when none were
                                                  computed; one line; NaN in a sweep, raised alone (exit 1)
    another exception, a failed upload   FAILED   tag ragbench.error, traceback; NaN in a sweep, raised alone
    Ctrl-C, SIGTERM (Interrupted)        KILLED   raised at the next safe point (ragbench.interrupts)
    a full disk (DiskFull)               KILLED   where the store still takes it; raised
Library code raises; ``ragbench.__main__`` alone turns what reaches it into an exit code.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from omegaconf import OmegaConf

from ragbench import interrupts
from ragbench.errors import ConfigError, JobStopped, RagbenchError, Reported, coded, described
from ragbench.identity import job_hash
from ragbench.outcome import objective, zero_scores
from ragbench.record import ERROR_TAG, REUSED_FROM, RecordWriter, RunRecord, begun, failed, finished
from ragbench.tracking import claims
from ragbench.tracking.full_disk import DiskFull, disk_full, job_places, where_full
from ragbench.tracking.mlflow_sink import log_failure, log_files, log_results, open_run, start_params
from ragbench.tracking.run_records import resumable
from ragbench.tracking.run_tags import component_params, start_tags

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from ragbench.components import Components, JobResult
    from ragbench.protocols import Judge
    from ragbench.tracking.mlflow_tracker import MlflowTracker

log = logging.getLogger("ragbench")
Work = Callable[["Job", "Components"], object]  # its results reach the record through ``Job.finished``


class Job:
    """One job's MLflow run and record. ``run(work, built)`` is the whole life: ``work(job, components)`` runs
    the pipeline (cases to ``job.writer``), hands its results to ``job.finished``, returns the metrics; ``built``
    is the components, or the RagbenchError building them raised (a sweep still records that job, FAILED)."""

    def __init__(self, cfg: DictConfig, tracker: MlflowTracker, *, name: str, parent: str | None,
                 multirun: bool, folder: Path) -> None:
        self.cfg, self.tracker, self.name, self.parent, self.multirun, self.folder = cfg, tracker, name, parent, multirun, folder
        self.record = begun(name, cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True)), job_hash)
        self.run_id: str | None = None
        self.writer: RecordWriter | None = None
        self.scored = False  # the results are in the record (else a failure logs 0 for its answer scores)
        self._judges: Iterable[Judge] = ()
        self._looked: set[str] = set()  # the runs resume judged: a second look (claims) judges only new ones

    def run(self, work: Work, built: Components | RagbenchError) -> float | None:
        """Runs ``work`` unless an earlier run of the job is reused; returns the objective (a record's)."""
        interrupts.check()  # a safe point: between jobs
        try:  # the store opens here: an unwritable or broken one is one line, and ends a sweep too
            if not self.multirun:
                self.tracker.close_stale_runs()
            previous = self._resume() or self._start(built)
            if previous is not None:
                return objective(self.cfg, previous.metrics)
        except RagbenchError as exc:
            log.error("%s", coded(exc))
            raise Reported(1) from exc
        try:
            self.tracker.log_params(str(self.run_id), start_params(self.record))
            self.writer = RecordWriter(self.folder, self.record)  # run.json says RUNNING from here on
            if isinstance(built, RagbenchError):
                raise built
            self._judges = built.judges.values()
            work(self, built)
            interrupts.check()  # a safe point: a job still in flight when the signal came ends KILLED
        except BaseException as exc:  # noqa: BLE001 - every way out ends the run (the table above)
            return self._failed(exc)
        try:
            value, wrong = objective(self.cfg, self.record.metrics), None
        except ConfigError as exc:  # a wrong objective name: the figures stand (FINISHED); the name is one line
            value, wrong, self.record = float("nan"), exc, failed(self.record, str(_text(exc)), {})
        self._end("FINISHED")
        if wrong is not None:
            log.error("%s", coded(wrong))
            if not self.multirun:
                raise wrong
        return value

    def finished(self, result: JobResult, *, topk: int, extra_tags: Mapping[str, str]) -> None:
        """The pipeline's results into the record and the run (a failure after this keeps them)."""
        assert self.run_id is not None and self.writer is not None
        self.record = finished(self.record, result, topk=topk, extra_tags=extra_tags)
        log_results(self.tracker, self.run_id, self.record, table=self.writer.table)
        self.scored = True

    def _start(self, built: Components | RagbenchError) -> RunRecord | None:
        tags = {"ragbench.role": "job", "ragbench.overrides": self.name, "ragbench.job_hash": self.record.job_hash}
        if not isinstance(built, RagbenchError):  # the tags known up front go in with the run's creation
            tags.update(start_tags(self.cfg, built))
            self.record = dataclasses.replace(self.record, params=component_params(built))
        self.record = dataclasses.replace(self.record, tags=tags)
        self.run_id = open_run(self.tracker, self.record, parent=self.parent, folder=self.folder)
        on = self.cfg.get("resume", True) and self.parent is not None  # ragbench.tracking.claims
        return claims.settled(self.tracker, self.run_id, self.record.job_hash, self._resume) if on else None

    def _resume(self) -> RunRecord | None:
        """In a sweep: a FINISHED earlier run's record (``resumable``), the run copied here (``reused_from``)."""
        tracker, jhash, cache = self.tracker, self.record.job_hash, self.cfg.get("cache", {}).get("dir") or "."
        done = tracker.finished_runs_of(jhash)  # its interrupted runs are closed KILLED (a live one is left)
        if (not self.cfg.get("resume", True) or self.parent is None or not done
                or (found := resumable(tracker.client, done, jhash, cache, self._looked)) is None):  # the record says
            return None
        run, record = found
        origin = run.data.tags.get(REUSED_FROM) or run.info.run_id
        copy = tracker.copy_run(run, run_name=self.name, parent_run_id=self.parent, tags={
            "ragbench.role": "job", "ragbench.overrides": self.name, "ragbench.job_hash": jhash, REUSED_FROM: origin})
        log.info("job already finished as MLflow run %s (resume=true); not running it again: shown in this sweep "
                 "as run %s", origin, copy)
        return record

    def _failed(self, exc: BaseException) -> float | None:
        """Ends the run as the table in the module docstring says; returns NaN where a sweep goes on."""
        cache = Path(str(OmegaConf.select(self.cfg, "cache.dir", default=None) or "."))
        full = exc if isinstance(exc, DiskFull) else where_full(exc, job_places(cache, self.folder), run_id=self.run_id)
        if full is not None:
            self._end("KILLED", full=full)
            if full is exc:
                raise
            raise full from exc
        if not isinstance(exc, Exception):  # an interrupt (KILLED: a rerun runs it again), SystemExit
            self._end("KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED")
            raise exc
        if isinstance(exc, RagbenchError):
            log.error("%s", coded(exc))
        else:
            log.error("job failed", exc_info=exc)
        self._end("KILLED" if isinstance(exc, JobStopped) else "FAILED", error=exc)
        if not self.multirun:
            raise exc
        return objective(self.cfg, {}, failed=True)

    def _end(self, status: str, *, error: BaseException | None = None, full: DiskFull | None = None) -> None:
        """The record's end into its file and into MLflow, then the run's status. A FINISHED job whose record
        cannot be logged ends FAILED (its error tagged, raised alone). On a full disk the run ends KILLED where
        the store still takes that; ``full`` lists it as closed or left RUNNING."""
        assert self.run_id is not None
        sink_error, stopped = None, full
        if full is None:
            try:
                sink_error = self._log(status, error)
            except DiskFull as again:  # the disk under the record, or the store's: KILLED if the store takes it
                stopped, status = again, "KILLED"
        try:
            self.tracker.end_run(self.run_id, "FAILED" if sink_error is not None else status)
        except DiskFull as again:
            (stopped or again).left.append(self.run_id)
            if stopped is None:
                raise
        else:
            if stopped is not None:
                stopped.closed.append(self.run_id)
        if stopped is not None and stopped is not full:
            raise stopped
        if sink_error is not None:
            log.error("the record of run %s was not logged: %s", self.run_id, sink_error)
            if not self.multirun:
                raise sink_error

    def _log(self, status: str, error: BaseException | None) -> Exception | None:
        """Writes the record's end (a failure's error tag and zero scores in it) into its file and logs it:
        the files, the failure's tags and scores. Returns what stopped the logging of a FINISHED job's record."""
        assert self.run_id is not None
        if error is not None and not isinstance(error, JobStopped):  # a budget stop is tagged as such (app)
            zeros = zero_scores(self._judges) if isinstance(error, RagbenchError) and not self.scored else {}
            self.record = failed(self.record, str(_text(error)), zeros)
        sink_error: Exception | None = None
        try:
            if self.writer is not None:  # None: the record never opened (its params or its folder failed)
                self.writer.finish(self.record.ended(status, _text(error)))
                log_files(self.tracker, self.run_id, self.folder)
        except Exception as exc:  # noqa: BLE001 - the job's failure, recorded on its run
            full = disk_full(exc, what="the job's record", path=self.folder, key="hydra.run.dir / hydra.sweep.dir", run_id=self.run_id)
            if full is not None:
                raise full from exc
            sink_error = exc
        if ERROR_TAG in self.record.tags or sink_error is not None:  # the record's error and zero scores
            log_failure(self.tracker, self.run_id, self.record, scored=self.scored, sink_error=_text(sink_error))
        if sink_error is not None and status != "FINISHED":
            log.warning("the record of the %s run %s was not logged: %s", status, self.run_id, sink_error)
            return None
        return sink_error


def _text(error: BaseException | None) -> str | None:
    return None if error is None else described(error)  # [RB-...] Class: message (ragbench.errors.CODES)
