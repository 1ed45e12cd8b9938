"""A job's outcome: its components checked once before the case loop, and FAILED when too many cases
failed (``max_failure_rate``) or an endpoint's circuit breaker stopped the loop."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ragbench.errors import ConfigError, JobFailedError
from ragbench.judge.aggregate import is_score, score_keys
from ragbench.llm.errors import LLMCircuitOpenError
from ragbench.protocols import Judge, Preflight
from ragbench.types import CaseResult
from ragbench.validate import real

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from ragbench.components import Components

log = logging.getLogger(__name__)
# More than half the cases failed: the end-to-end figures are then mostly the zeros of failed cases,
# a measure of the fault rather than of the configuration, and a sweep ranking would be decided by
# it. A job whose every case failed always fails; a few transient failures (a 429 storm, one odd
# reply) do not. CI gates that want no failures set max_failure_rate=0.
DEFAULT_MAX_FAILURE_RATE = 0.5


def max_failure_rate(cfg: Mapping[str, Any]) -> float:
    """The validated top-level ``max_failure_rate`` (a share of cases in [0, 1])."""
    value = cfg.get("max_failure_rate", DEFAULT_MAX_FAILURE_RATE)
    return real("max_failure_rate", value, lo=0, hi=1, default=DEFAULT_MAX_FAILURE_RATE)


def preflight(components: Components) -> None:
    """Loads or contacts, once and before any case, every component the case loop calls: cross-encoder
    weights, the generator and judges (one tiny request to a remote model), an API embedder."""
    c = components
    parts: list[Any] = [c.query, *c.rerankers, c.generator, *c.judges.values()]  # query: LLM transforms
    if c.embedder is not None and (c.retriever.needs_vectors or any(r.needs_vectors for r in c.rerankers)):
        parts.insert(0, c.embedder)
    for part in parts:
        if isinstance(part, Preflight):
            part.preflight()


def zero_scores(judges: Iterable[Judge]) -> dict[str, float]:
    """The end-to-end figures of a job that stopped before scoring any case: 0 for every key the judges name
    whose declaration is a score (a failed case counts 0). A diagnostic a judge also names
    (``judge/claims/hallucination``, lower is better) has no value without a case, as ``aggregate`` leaves it."""
    return {key: 0.0 for key in score_keys(judges) if is_score(key)}


def check(cases: Sequence[CaseResult], limit: float) -> None:
    """Raises when the job must end FAILED: an endpoint breaker tripped, or too many cases failed."""
    for case in cases:
        if case.error_type == LLMCircuitOpenError.__name__:
            raise LLMCircuitOpenError(case.error or "an LLM endpoint failed too often in a row")
    cases = [case for case in cases if not case.skipped]  # not run (budget): not failures
    failed = [case for case in cases if case.failed]
    rate = len(failed) / len(cases) if cases else 0.0
    if failed and math.isclose(rate, limit) and limit < 1:  # kept, but said: 3 of 6 is "not above 0.5"
        log.warning("%d of %d cases failed: failure rate %.3f = max_failure_rate=%g, at the limit, so the job is "
                    "kept (FINISHED; a failed case scores 0); fix: see the errors in cases.jsonl, or lower "
                    "max_failure_rate to fail such a job", len(failed), len(cases), rate, limit)
        return
    if rate > limit:
        first = failed[0]
        raise JobFailedError(
            f"{len(failed)} of {len(cases)} cases failed (failure rate {rate:.3f} > max_failure_rate={limit:g}); "
            f"the run is FAILED, its metrics are logged (a failed case scores 0); first error, case "
            f"{first.query.qid}: {first.error_type}: {' '.join((first.error or '').split())[:200]}; "
            f"fix: see the errors in cases.jsonl, or raise max_failure_rate (1 keeps every job)"
        )


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
