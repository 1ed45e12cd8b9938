"""One job's life in MLflow, and the process's interrupts: the one home of every exit path.

``JobRun`` wraps a job's work (the idea of lightning-hydra-template's ``task_wrapper``): it decides
resume-or-run, starts the MLflow run, logs the config and the result, and ends the run with its status
on every way out::

    success                            FINISHED   objective returned
    budget stopped the job (JobStopped) KILLED    one line; NaN in a sweep, exit 1 alone
    RagbenchError (config, data, LLM)  FAILED     tag ragbench.error, answer scores 0 if none were
                                                  logged; one line; NaN in a sweep, exit 1 alone
    any other exception                FAILED     tag ragbench.error, traceback; NaN in a sweep,
                                                  re-raised alone
    Ctrl-C, SIGTERM (Interrupted)      KILLED     re-raised: ``__main__`` closes the sweep run and
                                                  exits 128 + signal number (``interrupted``)
    case files cannot be written       FAILED     tag ragbench.error, then as the two rows above;
                                                  a sweep exits 1

A job's case files are written by a forked child (``ragbench.tracking.background``); its run ends once
they are uploaded. In a sweep whose jobs run in this process (the basic launcher) a FINISHED job's run
stays open for them while the next job runs: ``settle()`` ends it when the next job logs its result (or
starts, if it is the same job), before the sweep's table, and on every way out.

Only the standard library is imported at module level: ``__main__`` installs the signal handlers
from here before Hydra starts.
"""

from __future__ import annotations

import hashlib
import logging
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from ragbench import signals
from ragbench.errors import ConfigError, RagbenchError
from ragbench.signals import Interrupted  # noqa: F401 - re-exported (tests, callers)
from ragbench.tracking.run_tags import component_params, component_tags, start_tags  # noqa: F401 - component_tags: re-exported

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from ragbench.components import Components
    from ragbench.tracking.full_disk import DiskFull
    from ragbench.tracking.mlflow_tracker import MlflowTracker

log = logging.getLogger("ragbench")
INTERRUPTED = "interrupted; rerun the same command to resume"
# what a job's identity leaves out: where results go and how the run is steered, not what it computes
NOT_IDENTITY = ("tracking", "cache", "resume", "objective", "max_failure_rate", "budget", "plan")


def install_signal_handlers() -> None:
    """SIGINT and SIGTERM raise ``Interrupted`` in the main thread, held while a store write runs
    (ragbench.signals)."""
    signals.install_handlers()


_SETTLING: list[JobRun] = []  # FINISHED jobs of this process whose case files are still being written


def settling() -> bool:
    """Whether a job's run is still open for its case files."""
    return bool(_SETTLING)


def settle(*, interrupted: bool = False) -> None:
    """Ends the runs left open for their case files (see the module docstring), oldest first: uploaded and
    FINISHED, or FAILED when writing them failed. After an interrupt a child still writing is stopped and
    its run ends KILLED (a rerun runs the job again)."""
    while _SETTLING:
        _SETTLING[0].close(interrupted=interrupted)  # idempotent: an interrupt in it leaves the job listed
        _SETTLING.pop(0)


def interrupted(exc: KeyboardInterrupt) -> int:
    """After an interrupt reached the top: the sweep's parent run ends KILLED (each job's run already
    did, in ``JobRun``), one line is printed; returns the exit code, 128 + the signal number."""
    signals.ignore()  # a second signal must not cut the closing short
    settle(interrupted=True)
    sweep = sys.modules.get("ragbench.tracking.sweep")
    if sweep is not None:
        sweep.close_open_parents("KILLED")
    print(INTERRUPTED, file=sys.stderr)
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


def stopped_by_full_disk(full: DiskFull) -> int:
    """After a write failed for want of space: the runs still open (a job's awaiting its case files, the
    sweep's parent) end KILLED where the store takes it, the one line names the disk, the free space,
    the runs and the fix; returns the exit code, 1."""
    from ragbench.tracking.full_disk import DiskFull

    signals.ignore()  # a signal must not cut the closing short
    while _SETTLING:
        job = _SETTLING.pop(0)
        job._stop(full, kill=False)  # noqa: SLF001 - this module's own class
    sweep = sys.modules.get("ragbench.tracking.sweep")
    for _ in range(100):  # each parent that the store refuses to close raises once; the others are closed
        if sweep is None:
            break
        try:
            sweep.close_open_parents("KILLED")
            break
        except DiskFull as again:
            if again.run_id is not None:
                full.left.append(again.run_id)
    print(f"ragbench: {full.line()}", file=sys.stderr)
    return 1


class JobStopped(Exception):
    """The budget stopped the job part way: its run ends KILLED, so a rerun with a larger budget runs it
    again (from the cache)."""


def job_hash(resolved: Mapping[str, Any]) -> str:
    """Identity of a job: its resolved config minus where results go, plus the code version."""
    from ragbench import __version__
    from ragbench.cache.store import make_key
    from ragbench.tracking.job_log import git_commit

    config = {k: v for k, v in resolved.items() if k not in NOT_IDENTITY}
    return make_key({"config": config, "ragbench": __version__, "commit": git_commit(),
                     "inputs": input_fingerprints(resolved)})


# files whose content is a job's input (recorded answers, an outside ranking): a rewritten file at the same
# path is another job, so resume never shows the figures of the file's earlier content
INPUT_FILES = (("system", "path"), ("retrieval", "path"))


def input_fingerprints(resolved: Mapping[str, Any]) -> dict[str, str]:
    """SHA-256 of each file named by an ``INPUT_FILES`` key of the resolved config (absent files: none)."""
    out: dict[str, str] = {}
    for group, key in INPUT_FILES:
        section = resolved.get(group)
        path = section.get(key) if isinstance(section, Mapping) else None
        if not path or not Path(str(path)).is_file():
            continue
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        out[f"{group}.{key}"] = digest.hexdigest()
    return out


def objective(cfg: DictConfig, metrics: Mapping[str, float], *, failed: bool = False) -> float | None:
    """The metric a search sweeper maximises: NaN for a failed job (a failed trial, never a score)."""
    name = cfg.get("objective")
    if not name:
        return None
    if failed:
        return float("nan")
    if name not in metrics:
        close = sorted(k for k in metrics if k.split("/")[-1] == str(name).split("/")[-1])[:5]
        hint = ", ".join(close) or "answer/f1, retrieval/mrr_at_10, retrieval/hit_at_5"
        raise ConfigError(f"objective={name!r} is not a metric of this job; use a logged metric key, e.g. {hint}")
    return float(metrics[name])


Work = Callable[["JobRun", "Components"], Mapping[str, float]]


class JobRun:
    """One job's MLflow run, from the resume decision to its end status (see the module docstring).

    ``run(work, built)`` is the whole life: ``work(job, components)`` runs the pipeline, logs the result
    through ``job.log_result`` and returns the metrics; ``built`` is the job's components, or the
    RagbenchError that building them raised (in a sweep the job is still recorded, as a FAILED run).
    """

    def __init__(self, cfg: DictConfig, tracker: MlflowTracker, *, name: str, parent: str | None,
                 multirun: bool) -> None:
        from omegaconf import OmegaConf

        self.cfg, self.tracker, self.name, self.parent, self.multirun = cfg, tracker, name, parent, multirun
        resolved = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(resolved, dict)
        self.resolved = cast(dict[str, Any], resolved)
        self.jhash = job_hash(self.resolved)
        self.run_id: str | None = None
        self.status = "FAILED"
        self.scored = False  # the job's metrics are logged (else a failure logs 0 for its answer scores)
        self.objective: float | None = None
        self._components: Components | None = None
        self._params: dict[str, Any] = {}
        self._staged: Any = None  # the job's case files (ragbench.tracking.background.StagedFiles)
        self._ended = False

    # ------------------------------------------------------------------ the life
    def run(self, work: Work, built: Components | RagbenchError) -> float | None:
        """Runs ``work`` unless an earlier run of the same job is reused; returns the objective."""
        from ragbench.tracking.job_log import flatten

        if any(job.jhash == self.jhash for job in _SETTLING):
            settle()  # the same job, still open for its case files: FINISHED first, so resume reuses it
        previous = self._open(built)
        if previous is not None:
            try:
                return objective(self.cfg, previous.data.metrics)
            except RagbenchError as exc:  # objective= names no metric of the reused run
                log.error("%s", exc)
                sys.exit(1)
        with self:
            # the config and the components' own params in one set of log_batch calls
            self.tracker.log_params(self._id, {**flatten(self.resolved), **self._params})
            if isinstance(built, RagbenchError):
                raise built
            self._components = built
            metrics = work(self, built)
            self.status = "FINISHED"
            self.objective = objective(self.cfg, metrics)
        return self.objective

    def _open(self, built: Components | RagbenchError) -> Any | None:
        """The store opens here: an unwritable or broken one is one line, and ends a sweep. Returns the
        reused FINISHED run, or None once this job's run is started (with its params and tags)."""
        try:
            if not self.multirun:
                self.tracker.close_stale_runs()
            previous = self._resume()
            if previous is not None:
                return previous
            tags = {"ragbench.role": "job", "ragbench.overrides": self.name, "ragbench.job_hash": self.jhash}
            if not isinstance(built, RagbenchError):  # the tags known up front go in with the run's creation
                tags.update(start_tags(self.cfg, built))
                self._params = component_params(built)
            self.run_id = self.tracker.start_run(run_name=self.name, parent_run_id=self.parent, tags=tags)
        except RagbenchError as exc:
            log.error("%s", exc)
            sys.exit(1)
        return None

    def _resume(self) -> Any | None:
        """In a sweep, a FINISHED run of the same job, shown in this sweep as a copy (``ragbench.reused_from``)
        labelled with this sweep's job number and overrides; the earlier run and its sweep stay untouched.
        Interrupted runs of the job are closed as KILLED, unless their process is alive (a concurrent sweep).
        A single run always runs (the stage cache makes that cheap)."""
        from ragbench.tracking.case_record import REUSED_FROM
        from ragbench.tracking.owner import OWNER_TAG, owner_gone

        tracker = self.tracker
        prior = tracker.runs_with_tag("ragbench.job_hash", self.jhash)
        for stale in (r for r in prior if r.info.status == "RUNNING"):
            if owner_gone(stale.data.tags.get(OWNER_TAG)) is False:
                continue  # a live run of another sweep: it finishes on its own
            log.warning("closing interrupted run %s of this job as KILLED; it is replaced", stale.info.run_id)
            tracker.set_tags(stale.info.run_id, {"ragbench.replaced": "true"})
            tracker.end_run(stale.info.run_id, "KILLED")
        done = [r for r in prior if r.info.status == "FINISHED"]
        if not self.cfg.get("resume", True) or not done or self.parent is None:
            return None
        run = done[0]
        origin = run.data.tags.get(REUSED_FROM) or run.info.run_id
        copy = tracker.copy_run(run, run_name=self.name, parent_run_id=self.parent, tags={
            "ragbench.role": "job", "ragbench.overrides": self.name, "ragbench.job_hash": self.jhash,
            REUSED_FROM: origin})
        log.info("job already finished as MLflow run %s (resume=true); not running it again: shown in this sweep "
                 "as run %s", origin, copy)
        return run

    # ------------------------------------------------------------------ what the work logs
    @property
    def _id(self) -> str:
        assert self.run_id is not None, "the job's run is not started"
        return self.run_id

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        self.tracker.set_tags(self._id, tags)

    def log_result(self, result: Any, *, topk: int, extra_tags: Mapping[str, str]) -> None:
        """Everything about the finished pipeline (ragbench.tracking.job_log); from here on a failure
        (failure rate, budget) keeps the logged scores."""
        from omegaconf import OmegaConf

        from ragbench.tracking.background import StagedFiles
        from ragbench.tracking.job_log import case_files, log_job

        settle()  # the previous job's files were written while this job ran; at most one child at a time
        # the case files first: a forked child writes them while the rest is logged (and the next job runs)
        self._staged = StagedFiles(lambda: case_files(result, topk),
                                   fork=getattr(self.tracker, "background_artifacts", False))
        with self.tracker.batched(self._id):  # tags, metrics and curves in as few store writes as fit
            log_job(self.tracker, self._id, result, resolved_cfg=self.resolved,
                    config_yaml=OmegaConf.to_yaml(self.cfg, resolve=True), topk=topk, extra_tags=extra_tags)
        self.scored = True

    # ------------------------------------------------------------------ every way out
    def __enter__(self) -> JobRun:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        """Ends the run with its status; returns True where the failure is recorded and the sweep goes on."""
        if self.run_id is None:
            return False
        full = self._disk_full(exc)
        if full is not None:
            self._stop(full)
            if full is not exc:
                raise full from exc
            return False
        if exc is None and self._staged is not None and self._settles_later():
            _SETTLING.append(self)  # FINISHED once its case files are uploaded: settle()
            return False
        handled = False
        try:
            if isinstance(exc, KeyboardInterrupt):
                self.status = "KILLED"
            elif isinstance(exc, JobStopped):
                self.status = "KILLED"  # not FINISHED: a rerun (with a larger budget) runs it again
                log.error("%s", exc)
                handled = True
            elif isinstance(exc, Exception):
                self._record_failure(exc)
                handled = True
        finally:
            failure = self.close(interrupted=isinstance(exc, KeyboardInterrupt))
        if exc is None and failure is not None:  # the job succeeded; writing its case files did not
            exc, handled = failure, True
        if not handled:
            return False  # success, an interrupt, or SystemExit: on its way as it came
        if self.multirun:
            self.objective = objective(self.cfg, {}, failed=True)
            return True
        if isinstance(exc, RagbenchError | JobStopped):
            sys.exit(1)
        if failure is not None:
            raise failure
        return False  # a bug in a single run: the traceback

    def _settles_later(self) -> bool:
        """Whether this job's run may stay open for its case files after the job: only in a sweep whose
        callback runs in this process (it settles before its table; jobs in launcher workers do not)."""
        from ragbench.tracking.sweep import in_this_process

        return self.multirun and self.parent is not None and in_this_process(self.parent)

    def _disk_full(self, exc: BaseException | None, *, staging: Path | None = None) -> DiskFull | None:
        """``exc`` as a DiskFull: the store's own (raised by its client), or a job's write that failed for
        want of space (the stage cache, the case files' staging folder), named by the file it wrote or by
        ``cache.dir``."""
        from pathlib import Path

        from ragbench.tracking.full_disk import DiskFull, disk_full

        if exc is None or isinstance(exc, DiskFull):
            return exc
        if not isinstance(exc, Exception):
            return None
        from omegaconf import OmegaConf

        if staging is not None:  # the case files' staging folder lives in the temporary folder
            return disk_full(exc, what="the case files' staging folder", path=staging.parent, key="the TMPDIR environment variable",
                             run_id=self.run_id)
        cache = str(OmegaConf.select(self.cfg, "cache.dir", default=None) or ".")
        return disk_full(exc, what="the stage cache", path=Path(cache), key="cache.dir", run_id=self.run_id)

    def _stop(self, full: DiskFull, *, kill: bool = True) -> None:
        """The run ends KILLED (a rerun runs the job again; ``kill=False``: a FINISHED job whose case files
        are uploaded stays FINISHED) if the store still takes that; ``full`` lists it as closed or left."""
        from ragbench.tracking.full_disk import DiskFull

        if kill:
            self.status = "KILLED"
        try:
            self.close(interrupted=True)
        except DiskFull:
            pass
        if self.run_id is not None and not (self._ended and self.status == "FINISHED"):
            (full.closed if self._ended else full.left).append(self.run_id)

    def close(self, *, interrupted: bool = False) -> Exception | None:
        """Uploads the job's case files, then ends its run with its status (once). Returns the error when
        writing them failed: the run then ends FAILED with tag ``ragbench.error``. After an interrupt, a
        child still writing is stopped and the run ends KILLED."""
        if self._ended or self.run_id is None:
            return None
        staged, failure = self._staged, None
        try:
            if staged is not None:
                if interrupted and not staged.cancel():
                    self.status = "KILLED"
                else:
                    staged.wait()
                    from ragbench.tracking.job_log import CASE_TABLE

                    self.tracker.log_folder(self.run_id, staged.folder, tables=[CASE_TABLE])
        except Exception as exc:  # noqa: BLE001 - the job's failure, recorded on its run
            full = self._disk_full(exc, staging=staged.folder if staged is not None else None)
            if full is not None:  # the staging folder's disk: stop, as for the store's (DiskFull)
                self.status = "KILLED"
                raise full from exc
            if self.status == "FINISHED":
                self.status, failure = "FAILED", exc
                self._record_failure(exc)
            else:
                log.warning("the case files of the %s run %s were not logged: %s", self.status, self.run_id, exc)
        except BaseException:  # an interrupt while the files were awaited: not FINISHED without them
            self.status = "KILLED"
            raise
        finally:
            if staged is not None:
                staged.discard()
            self._staged = None
            self.tracker.end_run(self.run_id, self.status)
            self._ended = True
        return failure

    def _record_failure(self, exc: BaseException) -> None:
        """The error as a tag, answer scores 0 if none were logged; the status stays (FAILED, or FINISHED
        when only the objective's name was wrong, after the job's work was done and logged)."""
        try:
            self.tracker.set_tags(self._id, {"ragbench.error": f"{type(exc).__name__}: {exc}"})
            if isinstance(exc, RagbenchError) and self._components is not None and not self.scored:
                from ragbench.outcome import zero_scores

                self.tracker.log_metrics(self._id, zero_scores(self._components.judges.values()))
        finally:
            if isinstance(exc, RagbenchError):
                log.error("%s", exc)
            else:
                log.error("job failed", exc_info=exc)
