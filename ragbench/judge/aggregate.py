"""Per-case scores -> job metrics: end-to-end (failures as zero) beside successful-only, per type."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ragbench.judge import (
    asking,
    citations,
    claims,
    context,
    conversation,
    document,
    hops,
    locomo_f1,
    mlflow_scorers,
    reference_free,
    refusal,
    retrieval,
    rubrics,
    scorers,
    semantic,
    squad,
)
from ragbench.judge.locomo_f1 import SCORED_ON
from ragbench.judge.retrieval import MRR_KEY
from ragbench.metric_info import Column, MetricInfo, declared, merge
from ragbench.protocols import Judge
from ragbench.types import CaseResult

_COUNT = "a count over the job's cases"
_GROUP = re.compile(r"^by_(?:type|difficulty|tag|turn|followup)/[^/]+/")
_P = "the {}th percentile over the successful cases (ms)"
# what ``summarize`` adds beside the per-case means (the token and cost totals are ragbench.budget's)
METRICS: dict[str, MetricInfo] = {
    "answer/refusal_accuracy": MetricInfo(
        "share of the unanswerable questions whose answer is a refusal (answer/refused)", "ragbench",
        kind="diagnostic", job_level="mean of answer/refused over the successful unanswerable cases"),
    "answer/false_refusal_rate": MetricInfo(
        "share of the answerable questions whose answer is a refusal (answer/refused)", "ragbench",
        higher_is_better=False, kind="diagnostic",
        job_level="mean of answer/refused over the successful answerable cases"),
    "judge/coverage": MetricInfo("share of the cases an LLM judge saw that it graded (1 - judge/judge_failed)",
                                 "ragbench", kind="diagnostic", job_level="1 - mean of judge/judge_failed"),
    "cases/total": MetricInfo("cases attempted (skipped ones left out)", "ragbench", kind="diagnostic",
                              job_level=_COUNT, unit="count"),
    "cases/successful": MetricInfo("cases that ran to the end", "ragbench", kind="diagnostic", job_level=_COUNT,
                                   unit="count"),
    "cases/failed": MetricInfo("cases that failed (each scores 0 end to end)", "ragbench", higher_is_better=False,
                               kind="diagnostic", job_level=_COUNT, unit="count",
                               columns=(Column("cases/failed", "failed", 8),)),
    "cases/failure_rate": MetricInfo("cases/failed / cases/total; above max_failure_rate the job is FAILED",
                                     "ragbench", higher_is_better=False, kind="diagnostic",
                                     job_level="failed / attempted cases"),
    "cases/retrieval_ok": MetricInfo("cases whose retrieval step (search, rerank, expand) ended without error",
                                     "ragbench", kind="diagnostic", job_level=_COUNT, unit="count"),
    "cases/generation_ok": MetricInfo("cases that got an answer (jobs with a generator)", "ragbench",
                                      kind="diagnostic", job_level=_COUNT, unit="count"),
    "cases/judge_ok": MetricInfo("cases every judge graded: the judge step ended without error and no rubric's "
                                 "verdict failed to parse (jobs with a judge that reads the answer)", "ragbench",
                                 kind="diagnostic", job_level=_COUNT, unit="count"),
    "cases/skipped": MetricInfo("cases not run (a budget was reached): left out of every figure", "ragbench",
                                higher_is_better=False, kind="diagnostic", job_level=_COUNT, unit="count",
                                columns=(Column("cases/skipped", "skipped", 9),)),
    "retrieval/queries_scored": MetricInfo("the cases every retrieval/* figure averages over (matched evidence)",
                                           "ragbench", kind="diagnostic", job_level=_COUNT, unit="count"),
    "latency/<name>_p50_ms": MetricInfo("a stage's time per case (retrieve, rerank, expand, generate, judge...)",
                                        "ragbench", higher_is_better=False, kind="diagnostic",
                                        job_level=_P.format(50)),
    "latency/<name>_p95_ms": MetricInfo("a stage's time per case (retrieve, rerank, expand, generate, judge...)",
                                        "ragbench", higher_is_better=False, kind="diagnostic",
                                        job_level=_P.format(95)),
    "tokens/prompt_mean": MetricInfo("prompt tokens per answer", "the provider's usage (litellm)",
                                     higher_is_better=False, kind="diagnostic",
                                     job_level="mean over the cases with an answer"),
    "tokens/completion_mean": MetricInfo("completion tokens per answer", "the provider's usage (litellm)",
                                         higher_is_better=False, kind="diagnostic",
                                         job_level="mean over the cases with an answer"),
    "llm/cache_hits": MetricInfo("answers the LLM reply cache served", "ragbench", kind="diagnostic",
                                 job_level=_COUNT, unit="count"),
    **conversation.METRICS,  # conversation/*: per-conversation figures (ragbench.judge.conversation)
}
# Every per-case key, declared beside the code that computes it, then what summarize adds. The last table is
# the one declaration of a RetrievalScorer's keys (``retrieval/<name>``): it is tried after every other.
CASE_METRICS: dict[str, MetricInfo] = merge(
    squad.METRICS, locomo_f1.METRICS, refusal.METRICS, rubrics.METRICS, reference_free.METRICS,
    reference_free.FAILED, claims.METRICS, asking.METRICS, retrieval.METRICS, document.METRICS, context.METRICS,
    hops.METRICS, mlflow_scorers.METRICS, semantic.METRICS, citations.METRICS)
DECLARED: dict[str, MetricInfo] = merge(CASE_METRICS, METRICS, scorers.METRICS)
# each LLM judge score's per-case failure key (1 when the case got no parsable verdict for it)
FAILED_BY: dict[str, str] = {**rubrics.FAILED_BY, **reference_free.FAILED_BY, **claims.FAILED_BY}


def coverage(metrics: Mapping[str, float], key: str) -> float | None:
    """The share of the cases a judge saw that got a verdict for judge score ``key`` (``by_type/<t>/<key>``
    too): 1 - the job mean of its failure key; None for a key no LLM judge scores, or a job that does not
    say (older runs)."""
    group = _GROUP.match(key)
    prefix = group.group(0) if group else ""
    failure = FAILED_BY.get(key[len(prefix):])
    if failure is None or f"{prefix}{failure}" not in metrics:
        return None
    return 1.0 - float(metrics[f"{prefix}{failure}"])


def metric_info(key: str) -> MetricInfo:
    """The declaration of a per-case key or of a key ``aggregate`` adds (``by_type/<t>/<key>`` and
    ``<score>_successful`` included); an undeclared key is an ``UndeclaredMetricError``."""
    return declared(DECLARED, key)


def is_score(key: str) -> bool:
    """True for the keys declared ``kind="score"``: a failed case contributes zero to their job figure."""
    return metric_info(key).kind == "score"


def score_keys(judges: Iterable[Judge]) -> list[str]:
    """The answer-quality keys the judges declare (``Judge.score_keys``): a job whose every case failed
    reports 0 for them, not nothing (a job whose cases ran and produced none of a key does not log it)."""
    return sorted({key for judge in judges for key in judge.score_keys})


def end_to_end(case: CaseResult, key: str) -> float:
    """The one rule for end-to-end figures: a failed case is 0 for every score, whatever partial
    scores it holds (a lexical F1 computed before the LLM judge failed does not count)."""
    return 0.0 if case.failed else case.scores.get(key, 0.0)


def metric_name(text: str) -> str:
    """A question type as a valid, stable MLflow name part (``yes/no`` -> ``yes_no``)."""
    return re.sub(r"[^a-z0-9_.-]+", "_", text.strip().lower()).strip("_") or "unknown"


def stage_counts(cases: Sequence[CaseResult]) -> dict[str, float]:
    """``cases/retrieval_ok``, ``cases/generation_ok``, ``cases/judge_ok``: the attempted cases each step
    ended for (a step records its latency when it ends: ``ragbench.cases``), beside the end-to-end count
    ``cases/successful``; the last two only where some case reached that step."""
    out = {"cases/retrieval_ok": float(sum("expand" in c.latency for c in cases))}
    if any("generate" in c.latency or c.answer is not None for c in cases):
        out["cases/generation_ok"] = float(sum("generate" in c.latency for c in cases))
    if any("judge" in c.latency for c in cases):
        out["cases/judge_ok"] = float(sum("judge" in c.latency and not any(
            k.endswith("judge_failed") and v for k, v in c.scores.items()) for c in cases))
    return out


def percentile_ms(values: Sequence[float], q: float) -> float:
    """The q-th percentile of seconds, in milliseconds (0 when there are none)."""
    return float(np.percentile(np.asarray(values) * 1000.0, q)) if values else 0.0


def _mean(values: Iterable[float]) -> float | None:
    vals = list(values)
    return float(sum(vals) / len(vals)) if vals else None


def summarize(cases: Sequence[CaseResult], keys: Sequence[str] | None = None) -> dict[str, float]:
    """Metrics of one group of cases (overall, or one question type). ``keys`` are the score keys
    of the whole job, so a group whose every case failed still reports zeros, not nothing. A score no
    case produced while some case ran to the end is not reported: nothing measured it (an LLM judge
    none of whose verdicts parsed), and a 0 would read as "every answer wrong"."""
    out: dict[str, float] = {}
    skipped = sum(c.skipped for c in cases)  # not run (budget): left out of every figure, counted apart
    cases = [c for c in cases if not c.skipped]
    ok = [c for c in cases if not c.failed]
    produced = {k for c in cases for k in c.scores}
    keys = sorted(set(keys or ()) | produced)
    for key in keys:
        present = [c.scores[key] for c in cases if key in c.scores]
        if not is_score(key):
            mean = _mean(present)
            if mean is not None:
                out[key] = mean
            continue
        if key not in produced and ok:
            continue  # never measured (judge/coverage 0): absent, not 0
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
    out.update(stage_counts(cases))
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
    ``by_difficulty/<level>/<metric>`` when questions carry a ``difficulty``, ``by_tag/<tag>/<metric>`` per
    tag of the questions' ``tags``; ``by_turn/<n>/<metric>``,
    ``by_followup/<mark>/<metric>`` and ``conversation/*`` for conversations' turns); ``declared`` score
    keys (see ``score_keys``) are reported as 0 by a group whose every case failed."""
    keys = sorted({k for c in cases for k in c.scores} | set(declared))
    out = summarize(cases, keys)
    by_type: dict[str, list[CaseResult]] = defaultdict(list)
    for c in cases:
        by_type[metric_name(c.query.question_type)].append(c)
    by_difficulty: dict[str, list[CaseResult]] = defaultdict(list)  # the custom format's `difficulty`
    for c in cases:
        if c.query.meta.get("difficulty") not in (None, ""):
            by_difficulty[metric_name(str(c.query.meta["difficulty"]))].append(c)
    by_tag: dict[str, list[CaseResult]] = defaultdict(list)  # the custom format's `tags`: a case counts in each
    for c in cases:
        for tag in dict.fromkeys(metric_name(str(t)) for t in c.query.meta.get("tags") or ()):
            by_tag[tag].append(c)
    out.update(conversation.conversation_metrics(cases))  # conversation/*: only where cases are turns
    for family, groups in (("by_type", by_type), ("by_difficulty", by_difficulty), ("by_tag", by_tag),
                           *conversation.turn_groups(cases)):  # by_turn/*, by_followup/*: conversations' turns
        for name, group in sorted(groups.items()):
            for key, value in summarize(group, keys).items():
                if key.startswith(("tokens/", "cost/", "llm/", "latency/")):
                    continue
                out[f"{family}/{name}/{key}"] = value
    return out
