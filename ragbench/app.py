"""One job: instantiate components from the config, run the pipeline, log to MLflow, close the run."""

from __future__ import annotations

import logging
import sys
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ragbench.errors import ConfigError, RagbenchError
from ragbench.pipeline import Components, JobResult, Pipeline
from ragbench.tracking.job_log import flatten, log_job
from ragbench.tracking.mlflow_tracker import MlflowTracker
from ragbench.tracking.report import job_summary
from ragbench.tracking.sweep import parent_run_id

log = logging.getLogger("ragbench")


def build(cfg: DictConfig) -> Components:
    """Instantiates every component named by ``_target_``; nothing heavy loads here."""
    try:
        rr = cfg.reranker
        return Components(
            dataset=instantiate(cfg.dataset),
            chunker=instantiate(cfg.chunker),
            embedder=instantiate(cfg.embedder) if cfg.get("embedder") else None,
            retriever=instantiate(cfg.retrieval.retriever),
            topk=int(cfg.retrieval.topk),
            rerankers=[instantiate(node) for node in (rr.get("rerankers") or {}).values()],
            candidates=int(rr.get("candidates") or 0),
            expander=instantiate(cfg.expander),
            generator=instantiate(cfg.llm),
            judges={name: instantiate(node) for name, node in (cfg.judge.get("judges") or {}).items()},
        )
    except RagbenchError:
        raise
    except Exception as exc:  # noqa: BLE001 - Hydra wraps constructor errors; show the user which one
        cause = exc.__cause__ if isinstance(exc.__cause__, RagbenchError) else None
        if cause is not None:
            raise cause from exc
        raise ConfigError(f"cannot build a component from the config: {exc}") from exc


class _CaseProgress:
    """A rich progress bar over the case loop (plain log lines when not on a terminal)."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        self._bar = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                             TimeRemainingColumn(), transient=True, disable=not sys.stderr.isatty())
        self._task: Any = None
        self._last = 0

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self._task is None:
            self._bar.start()
            self._task = self._bar.add_task(stage, total=total)
        self._bar.update(self._task, completed=done)
        if not sys.stderr.isatty() and (done == total or done - self._last >= max(total // 10, 1)):
            log.info("%s: %d/%d", stage, done, total)
            self._last = done
        if done == total:
            self._bar.stop()


def _job_name() -> tuple[str, str | None, bool]:
    """(run name, parent run id, multirun?) from Hydra's runtime config (also under ``compose``)."""
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    name = OmegaConf.select(hc, "job.override_dirname", default=None, throw_on_missing=False) or "ragbench"
    if not multirun:
        return name, None, False
    return f"#{hc.job.num} {name}", parent_run_id(hc.sweep.dir), True


def run(cfg: DictConfig) -> float | None:
    """Runs one job and returns ``cfg.objective`` (for search sweepers), or None."""
    tracker: MlflowTracker = instantiate(cfg.tracking)
    name, parent, multirun = _job_name()
    resolved = OmegaConf.to_container(cfg, resolve=True)
    run_id = tracker.start_run(run_name=name, parent_run_id=parent,
                               tags={"ragbench.role": "job", "ragbench.overrides": name})
    status = "FAILED"
    try:
        tracker.log_params(run_id, flatten(resolved))
        components = build(cfg)
        tracker.set_tags(run_id, {
            "ragbench.generator": components.generator.identity,
            "ragbench.embedder": components.embedder.identity if components.embedder else "none",
        })
        result: JobResult = Pipeline(components, progress=_CaseProgress()).run()
        log_job(tracker, run_id, result, resolved_cfg=resolved, config_yaml=OmegaConf.to_yaml(cfg, resolve=True),
                topk=components.topk, extra_tags={})
        status = "FINISHED"
        job_summary(title=f"ragbench job {name}", metrics=result.metrics, fingerprints=result.fingerprints,
                    counts=result.counts, timings=result.timings, run_id=run_id)
        objective = cfg.get("objective")
        return float(result.metrics.get(objective, float("nan"))) if objective else None
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    except RagbenchError as exc:
        tracker.set_tags(run_id, {"ragbench.error": f"{type(exc).__name__}: {exc}"})
        log.error("%s", exc)
        if multirun:
            return None
        sys.exit(1)
    except Exception as exc:
        tracker.set_tags(run_id, {"ragbench.error": f"{type(exc).__name__}: {exc}"})
        log.exception("job failed")
        if multirun:
            return None
        raise
    finally:
        tracker.end_run(run_id, status)
