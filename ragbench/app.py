"""One job: instantiate components from the config, run the pipeline, log to MLflow, close the run."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping
from typing import Any, cast

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ragbench import __version__, redact
from ragbench.budget import LEDGER, Budget, accounting_metrics, budget_stop
from ragbench.cache.replies import reply_store
from ragbench.cache.store import StageCache
from ragbench.components import Components, JobResult
from ragbench.config_check import check_config
from ragbench.errors import ConfigError, RagbenchError
from ragbench.judge.build import build_judges
from ragbench.outcome import check, max_failure_rate, preflight, zero_scores
from ragbench.pipeline import Pipeline
from ragbench.plan.rates import record_rates
from ragbench.query.options import query_options
from ragbench.retrieval.baselines import baseline_of
from ragbench.retrieval.batch import DEFAULT_SEARCH_DEPTH
from ragbench.retrieval.scope import check_scope
from ragbench.routing import routing_tag
from ragbench.stages import builds_llm
from ragbench.tracking.environment import embedder_dim_tag, environment_tags
from ragbench.tracking.job_log import flatten, log_job
from ragbench.tracking.mlflow_tracker import MlflowTracker
from ragbench.tracking.owner import OWNER_TAG, owner_gone
from ragbench.tracking.report import job_summary
from ragbench.tracking.sweep import parent_run_id

log = logging.getLogger("ragbench")
LOG_EVERY_S = 30.0
logging.getLogger("faiss.loader").setLevel(logging.WARNING)  # its INFO lines list missing CPU variants


def _instantiate(node: Any, **kwargs: Any) -> Any:
    """``hydra.utils.instantiate`` that surfaces a component's own RagbenchError, not Hydra's wrapper."""
    try:
        return instantiate(node, **kwargs)
    except RagbenchError:
        raise
    except Exception as exc:
        cause = exc.__cause__
        if isinstance(cause, RagbenchError):
            raise cause from None
        raise ConfigError(f"cannot build a component from the config: {exc}") from exc


def build(cfg: DictConfig) -> tuple[Components, StageCache]:
    """Instantiates every component named by ``_target_``; nothing heavy loads here."""
    check_config(cfg)  # unknown group keys, out-of-range numbers: before MLflow or any model
    cache = _instantiate(cfg.cache)
    with reply_store(cache):  # LLM clients built here keep their replies in the job's store
        return _components(cfg), cache


def _components(cfg: DictConfig) -> Components:
    rr = cfg.reranker
    llm = builds_llm(cfg)  # stages=retrieval: no generator, no judge (ragbench.stages)
    return Components(
        dataset=_instantiate(cfg.dataset),
        chunker=_instantiate(cfg.chunker),
        embedder=_instantiate(cfg.embedder) if cfg.get("embedder") else None,
        retriever=_instantiate(cfg.retrieval.retriever),
        topk=int(cfg.retrieval.topk),
        rerankers=[_instantiate(node) for node in (rr.get("rerankers") or {}).values()],
        candidates=int(rr.get("candidates") or 0),
        expander=_instantiate(cfg.expander),
        generator=_instantiate(cfg.llm) if llm else None,
        judges=build_judges(cfg.judge, _instantiate) if llm else {},
        scope=check_scope(str(cfg.retrieval.get("scope") or "corpus")),
        search_depth=int(cfg.retrieval.get("search_depth") or DEFAULT_SEARCH_DEPTH),
        parent_vectors=str(cfg.retrieval.get("parent_vectors") or "none"),
        **query_options(cfg, _instantiate),
    )


def _component_params(components: Components) -> dict[str, Any]:
    """What the config does not show: prompt and rubric file hashes of the generator and judges."""
    out: dict[str, Any] = {}
    for comp in (components.generator, *components.judges.values()):
        params = getattr(comp, "params", None)
        if callable(params):
            out.update(params())
    return out


def _component_tags(components: Components) -> dict[str, str]:
    out: dict[str, str] = {}
    for comp in (components.generator, *components.judges.values()):
        tags = getattr(comp, "tags", None)
        if callable(tags):
            out.update({str(k): str(v) for k, v in tags().items()})
    return out


class _CaseProgress:
    """A rich progress bar over the case loop (plain log lines when not on a terminal)."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        self._bar = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                             TimeRemainingColumn(), transient=True, disable=not sys.stderr.isatty())
        self._task: Any = None
        self._last = time.monotonic()

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self._task is None:
            self._bar.start()
            self._task = self._bar.add_task(stage, total=total)
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
    return f"#{hc.job.num} {name}", parent_run_id(hc.sweep.dir), True


def job_hash(resolved: dict[str, Any]) -> str:
    """Identity of a job: its resolved config minus where results go, plus the code version."""
    from ragbench.cache.store import make_key
    from ragbench.tracking.job_log import git_commit

    config = {k: v for k, v in resolved.items() if k not in ("tracking", "cache", "resume", "objective",
                                                                "max_failure_rate", "budget", "plan")}
    return make_key({"config": config, "ragbench": __version__, "commit": git_commit()})


def _objective(cfg: DictConfig, metrics: Mapping[str, float], *, failed: bool = False) -> float | None:
    """The metric a search sweeper maximises: NaN for a failed job (a failed trial, never a score)."""
    objective = cfg.get("objective")
    if not objective:
        return None
    if failed:
        return float("nan")
    if objective not in metrics:
        close = sorted(k for k in metrics if k.split("/")[-1] == str(objective).split("/")[-1])[:5]
        hint = ", ".join(close) or "answer/f1, retrieval/mrr, retrieval/hit_at_5"
        raise ConfigError(f"objective={objective!r} is not a metric of this job; use a logged metric key, e.g. {hint}")
    return float(metrics[objective])


def _resume(cfg: DictConfig, tracker: MlflowTracker, jhash: str, parent: str | None, name: str) -> Any | None:
    """In a sweep, a FINISHED run of the same job, shown in this sweep as a copy (``ragbench.reused_from``)
    labelled with this sweep's job number and overrides; the earlier run and its sweep stay untouched.
    Interrupted runs of the job are closed as KILLED, unless their process is alive (a concurrent sweep).
    A single run always runs (the stage cache makes that cheap)."""
    prior = tracker.runs_with_tag("ragbench.job_hash", jhash)
    for stale in (r for r in prior if r.info.status == "RUNNING"):
        if owner_gone(stale.data.tags.get(OWNER_TAG)) is False:
            continue  # a live run of another sweep: it finishes on its own
        log.warning("closing interrupted run %s of this job as KILLED; it is replaced", stale.info.run_id)
        tracker.set_tags(stale.info.run_id, {"ragbench.replaced": "true"})
        tracker.end_run(stale.info.run_id, "KILLED")
    done = [r for r in prior if r.info.status == "FINISHED"]
    if not cfg.get("resume", True) or not done or parent is None:
        return None
    run = done[0]
    origin = run.data.tags.get("ragbench.reused_from") or run.info.run_id
    copy = tracker.copy_run(run, run_name=name, parent_run_id=parent, tags={
        "ragbench.role": "job", "ragbench.overrides": name, "ragbench.job_hash": jhash, "ragbench.reused_from": origin})
    log.info("job already finished as MLflow run %s (resume=true); not running it again: shown in this sweep "
             "as run %s", origin, copy)
    return run


def run(cfg: DictConfig) -> float | None:
    """Runs one job and returns ``cfg.objective`` (for search sweepers), or None."""
    name, parent, multirun = _job_name()
    if LEDGER.stopped is not None and LEDGER.budget.scope == "sweep":  # the sweep's budget is spent
        log.error("not started: %s", LEDGER.stopped)
        return _objective(cfg, {}, failed=True) if multirun else None
    try:  # config errors first, before MLflow or any model is imported: they answer in about a second
        redact.check_config(OmegaConf.to_container(cfg, resolve=False))
        components, cache = build(cfg)
        limit = max_failure_rate(cfg)
        budget = Budget.from_config(cfg.get("budget"))
        built: RagbenchError | None = None
    except RagbenchError as exc:
        if not multirun:
            log.error("%s", exc)
            sys.exit(1)
        built = exc  # in a sweep the failed job is still recorded as a FAILED run below
    tracker: MlflowTracker = _instantiate(cfg.tracking)
    resolved = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))
    assert isinstance(resolved, dict)
    jhash = job_hash(resolved)
    try:  # the store opens here: an unwritable or broken one is one line, and ends a sweep
        if not multirun:
            tracker.close_stale_runs()
        previous = _resume(cfg, tracker, jhash, parent, name)
        if previous is not None:
            return _objective(cfg, previous.data.metrics)
        run_id = tracker.start_run(run_name=name, parent_run_id=parent, tags={
            "ragbench.role": "job", "ragbench.overrides": name, "ragbench.job_hash": jhash})
    except RagbenchError as exc:
        log.error("%s", exc)
        sys.exit(1)
    status = "FAILED"
    scored = False  # the job's metrics are logged (else a failure logs 0 for its answer scores)
    try:
        tracker.log_params(run_id, flatten(resolved))
        if built is not None:
            raise built
        tracker.set_tags(run_id, {
            "ragbench.generator": components.generator.identity if components.generator else "none",
            "ragbench.stages": str(cfg.get("stages", "all")),
            "ragbench.embedder": components.embedder.identity if components.embedder else "none",
            **_component_tags(components), **environment_tags(), **routing_tag(components.routes),
        })
        tracker.log_params(run_id, _component_params(components))
        LEDGER.start_job(budget)
        before = LEDGER.snapshot()  # this job's LLM calls, tokens and cost: the ledger's difference
        preflight(components)  # a component that cannot load fails the job here, once, not every case
        result: JobResult = Pipeline(components, cache=cache, progress=_CaseProgress()).run()
        result.metrics.update(accounting_metrics(before, LEDGER.snapshot()))  # type: ignore[attr-defined]
        stopped = budget_stop(result.cases)
        if stopped:
            tracker.set_tags(run_id, {"ragbench.stopped_by_budget": stopped})
        if baseline_of(components.retriever):
            tracker.set_tags(run_id, {"ragbench.baseline": str(baseline_of(components.retriever))})
        log_job(tracker, run_id, result, resolved_cfg=resolved, config_yaml=OmegaConf.to_yaml(cfg, resolve=True),
                topk=components.topk,
                extra_tags={**{f"ragbench.cache_key.{k}": v for k, v in result.cache_keys.items()},
                            **embedder_dim_tag(dict(result.counts))})
        scored = True
        job_summary(title=f"ragbench job {name}", metrics=result.metrics, fingerprints=result.fingerprints,
                    counts=result.counts, timings=result.timings, run_id=run_id)
        record_rates(cache, components, result)
        check(result.cases, limit)  # too many failed cases, or an endpoint that kept refusing: FAILED
        if stopped:  # KILLED, not FINISHED: a rerun (with a larger budget) runs it again, from the cache
            status = "KILLED"
            log.error("stopped by budget: %s; %d cases skipped; fix: raise the budget and rerun (cached work "
                      "is reused)", stopped, sum(c.skipped for c in result.cases))
            if multirun:
                return _objective(cfg, {}, failed=True)
            sys.exit(1)
        status = "FINISHED"
        return _objective(cfg, result.metrics)
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    except RagbenchError as exc:
        tracker.set_tags(run_id, {"ragbench.error": f"{type(exc).__name__}: {exc}"})
        if built is None and not scored:
            tracker.log_metrics(run_id, zero_scores(components.judges.values()))
        log.error("%s", exc)
        if multirun:
            return _objective(cfg, {}, failed=True)
        sys.exit(1)
    except Exception as exc:
        tracker.set_tags(run_id, {"ragbench.error": f"{type(exc).__name__}: {exc}"})
        log.exception("job failed")
        if multirun:
            return _objective(cfg, {}, failed=True)
        raise
    finally:
        tracker.end_run(run_id, status)
