"""One job: its components from the config (``ragbench.build``), the pipeline, its record and run
(``ragbench.job``)."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any, cast

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from ragbench import processed_docs, redact
from ragbench.budget import Budget, accounting_metrics, budget_stop
from ragbench.build import build, instantiate_node
from ragbench.components import Components, JobResult
from ragbench.embed.auto import backend_tag
from ragbench.errors import JobStopped, RagbenchError, coded
from ragbench.job import Job
from ragbench.outcome import check, max_failure_rate, objective, preflight
from ragbench.pipeline import Pipeline
from ragbench.plan.rates import record_rates
from ragbench.record import case_record
from ragbench.retrieval.baselines import baseline_of
from ragbench.session import LEDGER
from ragbench.stages import answer_stages, builds_llm
from ragbench.sweep import in_this_process, parent_run_id, shared_ledger
from ragbench.systems.components import system_metrics
from ragbench.tracking.environment import embedder_dim_tag
from ragbench.tracking.mlflow_tracker import MlflowTracker
from ragbench.tracking.per_query import log_case
from ragbench.tracking.report import job_summary
from ragbench.tracking.run_names import job_run_name, read_sweep_keys

log = logging.getLogger("ragbench")
LOG_EVERY_S = 30.0
logging.getLogger("faiss.loader").setLevel(logging.WARNING)  # its INFO lines list missing CPU variants


class _CaseProgress:
    """A rich progress bar over the case loop (plain log lines when not on a terminal)."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        self._bar = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                             TimeRemainingColumn(), transient=True, disable=not sys.stderr.isatty())
        self._task: Any = None
        self._stage = ""
        self._last = time.monotonic()

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self._task is None or stage != self._stage:  # a job's waves: a bar each (ragbench.pipeline)
            self._bar.start()
            self._task, self._stage = self._bar.add_task(stage, total=total), stage
        self._bar.update(self._task, completed=done)
        # off a terminal: the last line, and one every LOG_EVERY_S while a long loop runs (not 10 per job)
        if not sys.stderr.isatty() and (done == total or time.monotonic() - self._last >= LOG_EVERY_S):
            log.info("%s: %d/%d", stage, done, total)
            self._last = time.monotonic()
        if done == total:
            self._bar.stop()


def _job_name() -> tuple[str, str | None, bool]:
    """(run name, parent run id, multirun?) from Hydra's runtime config (also under ``compose``)."""
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    name = OmegaConf.select(cast(DictConfig, hc), "job.override_dirname", default=None, throw_on_missing=False) or "ragbench"
    name = redact.redact(name)
    if not multirun:
        return name, None, False
    return job_run_name(hc.job.num, name, read_sweep_keys(hc.sweep.dir)), parent_run_id(hc.sweep.dir), True


def run(cfg: DictConfig) -> float | None:
    """Runs one job and returns ``cfg.objective`` (for search sweepers), or None. The run's life (resume,
    start, record, end on every exit path) is ``ragbench.job.Job``'s."""
    name, parent, multirun = _job_name()
    # jobs in a launcher's worker processes share the sweep's budget through a file (ragbench.budget_file)
    worker = multirun and not (parent is not None and in_this_process(parent))
    shared = shared_ledger(HydraConfig.get().sweep.dir, parent) if worker else None
    try:
        stopped = LEDGER.sweep_stopped(shared)
    except RagbenchError:
        stopped = None  # an unreadable file: the job's first request says so, in its run
    if stopped is not None:  # the sweep's budget is spent
        log.error("not started: %s", stopped)
        return objective(cfg, {}, failed=True) if multirun else None
    built: Components | RagbenchError
    try:  # config errors first, before MLflow or any model is imported: they answer in about a second
        redact.check_config(OmegaConf.to_container(cfg, resolve=False))
        built, cache = build(cfg)
        limit = max_failure_rate(cfg)
        budget = Budget.from_config(cfg.get("budget"))
    except RagbenchError as exc:
        if not multirun:
            log.error("%s", coded(exc))
            raise
        built = exc  # in a sweep the failed job is still recorded as a FAILED run

    def work(job: Job, components: Components) -> None:  # its results reach the record: job.finished
        LEDGER.start_job(budget, shared=shared)
        before = LEDGER.snapshot()  # this job's LLM calls, tokens and cost: the ledger's difference
        components = answer_stages(components)  # a dataset without gold answers (BEIR): retrieval only, said
        preflight(components)  # a component that cannot load fails the job here, once, not every case
        writer = job.writer
        assert writer is not None
        per_query = bool(OmegaConf.select(cfg, "log.per_query", default=False))

        def on_case(case: Any, lookup: Any) -> None:  # each finished case: its record line (and log line)
            line = case_record(case, lookup.tree, lookup.evidence.get(case.query.qid), dataset=lookup.dataset,
                               topk=components.topk, coverage=lookup.coverage.get(case.query.qid))
            writer.case(line)
            if per_query:
                log_case(line, components.topk)

        pipeline = Pipeline(components, cache=cache, progress=_CaseProgress(), on_case=on_case)
        result: JobResult = pipeline.run()
        if OmegaConf.select(cfg, "output.processed_docs", default=False):  # uploaded with the record
            processed_docs.write(job.folder, result.tree)
        no_gold = builds_llm(cfg) and pipeline.c.generator is None  # ran as stages=retrieval (answer_stages)
        result.metrics.update(accounting_metrics(before, LEDGER.snapshot()))  # type: ignore[attr-defined]
        result.metrics.update(system_metrics(components.retriever))  # type: ignore[attr-defined]
        stopped = budget_stop(result.cases)
        baseline = baseline_of(components.retriever)
        job.finished(result, topk=components.topk, extra_tags={
            **({"ragbench.stopped_by_budget": stopped} if stopped else {}),
            **({"ragbench.baseline": str(baseline)} if baseline else {}),
            **({"ragbench.llm_batches": ",".join(pipeline.batch_ids)} if pipeline.batch_ids else {}),
            **({"ragbench.stages": "retrieval (no gold answers)"} if no_gold else {}),
            **{f"ragbench.cache_key.{k}": v for k, v in result.cache_keys.items()},
            **embedder_dim_tag(dict(result.counts)), **backend_tag(components.embedder)})
        job_summary(title=f"ragbench job {job.name}", metrics=result.metrics, fingerprints=result.fingerprints,
                    counts=result.counts, timings=result.timings, run_id=job.run_id, topk=components.topk)
        record_rates(cache, components, result)
        check(result.cases, limit)  # too many failed cases, or an endpoint that kept refusing: FAILED
        if stopped:
            raise JobStopped(f"stopped by budget: {stopped}; {sum(c.skipped for c in result.cases)} cases "
                             "skipped; fix: raise the budget and rerun (cached work is reused)")

    tracker: MlflowTracker = instantiate_node(cfg.tracking)
    folder = Path(HydraConfig.get().runtime.output_dir) / "record"  # the job's record (ragbench.record)
    return Job(cfg, tracker, name=name, parent=parent, multirun=multirun, folder=folder).run(work, built)
