"""Per-case scores -> job metrics: end-to-end (failures as zero) beside successful-only, per type."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from ragbench.judge import claims, locomo_f1, reference_free, refusal, retrieval, squad
from ragbench.judge.locomo_f1 import SCORED_ON
from ragbench.judge.metric_info import MetricInfo, lookup
from ragbench.judge.retrieval import MRR_KEY
from ragbench.protocols import Judge
from ragbench.types import CaseResult

# Per-case keys that describe a case rather than score it: averaged over the cases that have them,
# never zero-filled for failed cases.
DIAGNOSTIC_SUFFIXES = ("refused", "judge_failed", "spread", "flip", "citation_hit_rate", "_tokens", "repeats",
                       "cost_usd", "cache_hits", "heuristic_refusal")


# keys whose meaning is declared beside their code (ragbench.judge.metric_info); the others are read by the rules here
DECLARED: dict[str, MetricInfo] = {**retrieval.METRICS, **squad.METRICS, **locomo_f1.METRICS, **refusal.METRICS,
                                   **reference_free.METRICS, **claims.METRICS}


def metric_info(key: str) -> MetricInfo | None:
    """The declaration of a per-case key (direction, score or diagnostic), None when it has none."""
    return lookup(DECLARED, key)


def is_score(key: str) -> bool:
    """True for answer-quality scores that a failed case contributes zero to: a declared key by its
    declaration; an undeclared one (context/*, judge/*, a user's retrieval/* scorer) by the rule below."""
    info = metric_info(key)
    if info is not None:
        return info.kind == "score"
    return not key.startswith(("retrieval/", "context/")) and not key.endswith(DIAGNOSTIC_SUFFIXES)


def score_keys(judges: Iterable[Judge]) -> list[str]:
    """The answer-quality keys the judges declare (``Judge.score_keys``): logged even when no case
    produced them, so a job whose every case failed reports 0 for them, not nothing."""
    return sorted({key for judge in judges for key in judge.score_keys})


def end_to_end(case: CaseResult, key: str) -> float:
    """The one rule for end-to-end figures: a failed case is 0 for every score, whatever partial
    scores it holds (a lexical F1 computed before the LLM judge failed does not count)."""
    return 0.0 if case.failed else case.scores.get(key, 0.0)


def metric_name(text: str) -> str:
    """A question type as a valid, stable MLflow name part (``yes/no`` -> ``yes_no``)."""
    return re.sub(r"[^a-z0-9_.-]+", "_", text.strip().lower()).strip("_") or "unknown"


def percentile_ms(values: Sequence[float], q: float) -> float:
    """The q-th percentile of seconds, in milliseconds (0 when there are none)."""
    return float(np.percentile(np.asarray(values) * 1000.0, q)) if values else 0.0


def _mean(values: Iterable[float]) -> float | None:
    vals = list(values)
    return float(sum(vals) / len(vals)) if vals else None


def summarize(cases: Sequence[CaseResult], keys: Sequence[str] | None = None) -> dict[str, float]:
    """Metrics of one group of cases (overall, or one question type). ``keys`` are the score keys
    of the whole job, so a group whose every case failed still reports zeros, not nothing."""
    out: dict[str, float] = {}
    skipped = sum(c.skipped for c in cases)  # not run (budget): left out of every figure, counted apart
    cases = [c for c in cases if not c.skipped]
    ok = [c for c in cases if not c.failed]
    keys = sorted(set(keys or ()) | {k for c in cases for k in c.scores})
    for key in keys:
        present = [c.scores[key] for c in cases if key in c.scores]
        if not is_score(key):
            mean = _mean(present)
            if mean is not None:
                out[key] = mean
            continue
        # end-to-end: every attempted case counts, a failed (or unjudged) case as zero -- of the cases the
        # key applies to (SCORED_ON: answer/locomo_f1 leaves LoCoMo's category 5 out)
        scope = SCORED_ON.get(key)
        counted = cases if scope is None else [c for c in cases if scope(c.query.meta)]
        if scope is not None and not counted:
            continue
        out[key] = float(sum(end_to_end(c, key) for c in counted) / len(counted)) if counted else 0.0
        succ = _mean(c.scores[key] for c in ok if key in c.scores)
        if succ is not None:
            out[f"{key}_successful"] = succ
    answerable = [c for c in ok if c.query.answerable and "answer/refused" in c.scores]
    unanswerable = [c for c in ok if not c.query.answerable and "answer/refused" in c.scores]
    if unanswerable:
        out["answer/refusal_accuracy"] = _mean(c.scores["answer/refused"] for c in unanswerable) or 0.0
    if answerable:
        out["answer/false_refusal_rate"] = _mean(c.scores["answer/refused"] for c in answerable) or 0.0
    judged = [c for c in ok if "judge/judge_failed" in c.scores]
    if judged:  # judged / attempted, over the cases an LLM judge saw
        out["judge/coverage"] = 1.0 - (_mean(c.scores["judge/judge_failed"] for c in judged) or 0.0)
    out["cases/total"] = float(len(cases))
    out["cases/successful"] = float(len(ok))
    out["cases/failed"] = float(len(cases) - len(ok))
    out["cases/failure_rate"] = (len(cases) - len(ok)) / len(cases) if cases else 0.0
    out["cases/skipped"] = float(skipped)
    out["retrieval/queries_scored"] = float(sum(MRR_KEY in c.scores for c in cases))  # what retrieval/* average over
    stages: dict[str, list[float]] = defaultdict(list)
    for c in ok:
        for stage, seconds in c.latency.items():
            stages[stage].append(seconds)
    for stage, values in stages.items():
        out[f"latency/{stage}_p50_ms"] = percentile_ms(values, 50)
        out[f"latency/{stage}_p95_ms"] = percentile_ms(values, 95)
    answers = [c.answer for c in cases if c.answer is not None]
    if answers:
        prompt = [a.usage.prompt_tokens for a in answers]
        completion = [a.usage.completion_tokens for a in answers]
        out["tokens/prompt_total"] = float(sum(prompt))
        out["tokens/completion_total"] = float(sum(completion))
        out["tokens/prompt_mean"] = float(np.mean(prompt))
        out["tokens/completion_mean"] = float(np.mean(completion))
        out["cost/usd_total"] = float(sum(a.usage.cost_usd for a in answers))
        out["llm/cache_hits"] = float(sum(a.usage.cached for a in answers))
    return out


def aggregate(cases: Sequence[CaseResult], declared: Iterable[str] = ()) -> dict[str, float]:
    """Overall metrics plus ``by_type/<type>/<metric>`` for every question type (and
    ``by_difficulty/<level>/<metric>`` when questions carry a ``difficulty``); ``declared`` score
    keys (see ``score_keys``) are reported even when no case produced them."""
    keys = sorted({k for c in cases for k in c.scores} | set(declared))
    out = summarize(cases, keys)
    by_type: dict[str, list[CaseResult]] = defaultdict(list)
    for c in cases:
        by_type[metric_name(c.query.question_type)].append(c)
    by_difficulty: dict[str, list[CaseResult]] = defaultdict(list)  # the custom format's `difficulty`
    for c in cases:
        if c.query.meta.get("difficulty") not in (None, ""):
            by_difficulty[metric_name(str(c.query.meta["difficulty"]))].append(c)
    for family, groups in (("by_type", by_type), ("by_difficulty", by_difficulty)):
        for name, group in sorted(groups.items()):
            for key, value in summarize(group, keys).items():
                if key.startswith(("tokens/", "cost/", "llm/", "latency/")):
                    continue
                out[f"{family}/{name}/{key}"] = value
    return out
