"""A job's metric dict, assembled in one place from its producers.

Each producer declares what its keys are: a *score* (a measure of the configuration: end-to-end with a
failed case counted as 0, beside ``<key>_successful`` over the cases that ran) or a *diagnostic* (what
the job did or met: latencies, cache hits, evidence matching, counts, timings; never zero-filled).

    cases       the per-case scores and diagnostics, aggregated (ragbench.judge.aggregate)
    stages      what the stages met: search latency, evidence matching, cache, fallbacks, trace counts, and
                the questions retrieval is scored on (counts/retrieval_scored, counts/retrieval_excluded/*)
    logged      what the tracker adds: counts/*, dataset/*, time/*_s and the fixed-name top-k views

``Pipeline.run`` puts ``cases`` + ``stages`` into ``JobResult.metrics``; ``ragbench.record``
logs ``job_metrics(result, topk)``, which adds ``logged``.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ragbench.components import JobResult
from ragbench.evidence import EvidenceMap, match_stats
from ragbench.judge.aggregate import aggregate, is_score, metric_info, metric_name, percentile_ms, score_keys
from ragbench.judge.retrieval import MRR_DEPTH, MRR_KEY
from ragbench.metric_info import MetricInfo
from ragbench.protocols import Judge
from ragbench.rerank.fallback import fallback_count
from ragbench.trace import trace_counts
from ragbench.types import CaseResult, EvalSet, Query

log = logging.getLogger(__name__)

Kind = Literal["score", "diagnostic"]
_GROUP = re.compile(r"^by_(?:type|difficulty|tag|turn|followup)/[^/]+/")


@dataclass(frozen=True)
class Produced:
    """One producer's metrics and the rule that names each key's kind."""

    producer: str
    values: Mapping[str, float]
    scores: frozenset[str] = frozenset()  # the keys that are scores; every other key is a diagnostic

    def kind(self, key: str) -> Kind:
        return "score" if key in self.scores else "diagnostic"


def assemble(*parts: Produced) -> dict[str, float]:
    """The parts merged in order (a later producer's key replaces an earlier one's)."""
    out: dict[str, float] = {}
    for part in parts:
        out.update(part.values)
    return out


def kinds(*parts: Produced) -> dict[str, Kind]:
    """Each key's kind, as its (last) producer declares it."""
    return {key: part.kind(key) for part in parts for key in part.values}


def case_metrics(cases: Sequence[CaseResult], judges: Iterable[Judge]) -> Produced:
    """Per-case scores aggregated overall and per question type. A key is a score when it aggregates a
    per-case score (``is_score``: zero for a failed case), overall or per group, or is its ``_successful``
    twin; case counts, latencies, tokens and per-case diagnostics are diagnostics."""
    declared = score_keys(judges)
    values = aggregate(cases, declared)
    per_case = {k for c in cases for k in c.scores} | set(declared)
    scores = frozenset(k for k in values
                       if (base := _GROUP.sub("", k).removesuffix("_successful")) in per_case and is_score(base))
    return Produced("cases", values, scores)


def stage_metrics(*, timings: Mapping[str, float], queries: Sequence[Query], single_s: Sequence[float],
                  evidence: Mapping[str, EvidenceMap], cache_counters: Mapping[str, float], embedded_texts: int,
                  scoped: bool, cases: Sequence[CaseResult], transform_failures: int,
                  model_loaded: bool) -> Produced:
    """What the stages met: all diagnostics."""
    out: dict[str, float] = {}
    if "search" in timings:  # hits from the cache: nothing was searched, so no latency (never 0 for "not measured")
        search_total = timings["search"] + timings.get("embed_queries", 0.0)
        out["latency/search_mean_ms"] = 1000.0 * search_total / max(len(queries), 1)
    if "model_load" in timings:  # one-off, kept apart; absent when no model was loaded
        out["latency/model_load_ms"] = 1000.0 * timings["model_load"]
    if single_s:
        out["latency/search_single_p50_ms"] = percentile_ms(single_s, 50)
        out["latency/search_single_p95_ms"] = percentile_ms(single_s, 95)
    for key, value in match_stats(evidence).items():
        out[key] = float(value)
    out.update(cache_counters)
    out["ingest/embedded_texts"] = float(embedded_texts)
    if scoped:  # questions naming no document searched the whole corpus
        out["retrieval/scope_corpus_fallbacks"] = float(sum(not q.doc_ids for q in queries))
    out["rerank/fallbacks"] = float(fallback_count([cs.trace for cs in cases]))
    if out["rerank/fallbacks"]:
        log.warning("a reranker could not score %d of %d cases; they kept the fused order (rerank/fallbacks)",
                    int(out["rerank/fallbacks"]), len(cases))
    out.update(trace_counts(cs.trace for cs in cases))
    out["expand/truncated_contexts"] = float(sum(ctx.truncated for cs in cases for ctx in cs.contexts))
    out.update(retrieval_exclusions(queries, evidence, cases))
    out["query/transform_failures"] = float(transform_failures)
    out["ingest/model_loaded"] = float(model_loaded)
    return Produced("stages", out)


# why a question has no retrieval scores, in the order the reasons are checked
EXCLUSION_REASONS = ("unanswerable", "no_evidence", "evidence_not_found", "not_run")


def exclusion_reason(query: Query, emap: EvidenceMap | None, case: CaseResult | None) -> str | None:
    """Why a question is out of every ``retrieval/*`` mean (None: it is in): ``unanswerable`` (the
    question has no answer in the documents), ``no_evidence`` (the release gives it no evidence),
    ``evidence_not_found`` (its evidence matches no text of the corpus: ``evidence/unmatched``),
    ``not_run`` (its case failed or was skipped before retrieval was scored)."""
    if case is not None and not case.skipped and MRR_KEY in case.scores:
        return None
    if not query.answerable:
        return "unanswerable"
    if not query.evidence:
        return "no_evidence"
    if emap is None or not emap.matched:
        return "evidence_not_found"
    return "not_run"


def retrieval_exclusions(queries: Sequence[Query], evidence: Mapping[str, EvidenceMap],
                         cases: Sequence[CaseResult]) -> dict[str, float]:
    """``counts/retrieval_scored``: the questions every ``retrieval/*`` metric averages over (as
    ``retrieval/queries_scored``); ``counts/retrieval_excluded/<reason>`` for the others, one reason each
    (``exclusion_reason``), so scored + excluded = the job's questions."""
    by_qid = {c.query.qid: c for c in cases}
    reasons = Counter(exclusion_reason(q, evidence.get(q.qid), by_qid.get(q.qid)) for q in queries)
    out = {"counts/retrieval_scored": float(reasons.pop(None, 0))}
    out.update({f"counts/retrieval_excluded/{r}": float(reasons.get(r, 0)) for r in EXCLUSION_REASONS})
    return out


def queries_by_type(evalset: EvalSet) -> Counter[str]:
    """How many questions of each type (metric-name form) the evaluation set holds."""
    return Counter(metric_name(q.question_type) for q in evalset.queries)


_AT_K = re.compile(r"^retrieval/(?P<name>[a-z]+)_at_(?P<k>\d+)$")
_AT_K_DOC = re.compile(r"^retrieval/doc/(?P<name>[a-z]+)_at_(?P<k>\d+)$")
# the figures a sweep is compared on: one fixed name each, whatever the job's top-k
HEADLINE = {
    "headline/hit_at_topk": "retrieval/hit_at_topk", "headline/recall_at_topk": "retrieval/recall_at_topk",
    f"headline/mrr_at_{MRR_DEPTH}": MRR_KEY, "headline/ndcg_at_topk": "retrieval/ndcg_at_topk",
    "headline/context_evidence_recall": "context/evidence_text_recall", "headline/answer_f1": "answer/f1",
    "headline/answer_em": "answer/em", "headline/judge_accuracy": "judge/accuracy",
    "headline/failure_rate": "cases/failure_rate",
}
_COUNT, _SRC = "a count", "ragbench"


def _diagnostic(definition: str, job_level: str, *, lower: bool = False, unit: str = "") -> MetricInfo:
    return MetricInfo(definition, _SRC, higher_is_better=not lower, kind="diagnostic", job_level=job_level,
                      unit=unit)


def _copy(src: str) -> MetricInfo:
    """A fixed-name copy's declaration: its source's, without the source's sweep-table roles."""
    info = metric_info(src)
    return replace(info, definition=f"{src} under a fixed name: {info.definition}", columns=(), ranks=())


# the keys the stages and the tracker add (stage_metrics, retrieval_exclusions, logged_metrics)
METRICS: dict[str, MetricInfo] = {
    "latency/search_mean_ms": _diagnostic("batched search time per query (embedding the queries included); absent "
                                          "when the hits came from the cache", "stage time / queries", lower=True),
    "latency/model_load_ms": _diagnostic("one-off model loading, kept apart from the stage times",
                                         "the stage timer", lower=True),
    "latency/search_single_p50_ms": _diagnostic("one query searched alone (the batch search's time per query "
                                                "hides it)", "the 50th percentile of the timed single searches",
                                                lower=True),
    "latency/search_single_p95_ms": _diagnostic("one query searched alone", "the 95th percentile of the timed "
                                                "single searches", lower=True),
    "ingest/embedded_texts": _diagnostic("texts the job embedded (0 when the index came from the cache)", _COUNT,
                                         unit="count"),
    "ingest/model_loaded": _diagnostic("1 when the job loaded the embedding model", "1 or 0"),
    "retrieval/scope_corpus_fallbacks": _diagnostic(
        "questions naming no document, which searched the whole corpus under retrieval.scope=document", _COUNT,
        unit="count"),
    "rerank/fallbacks": _diagnostic("cases a reranker could not score: they kept the fused order", _COUNT,
                                    lower=True, unit="count"),
    "expand/truncated_contexts": _diagnostic("contexts cut by expander.max_context_chars (each context) or "
                                             "expander.max_context_tokens (the total)", _COUNT, unit="count"),
    "query/transform_failures": _diagnostic("queries whose LLM transform failed (the question was searched as "
                                            "written)", _COUNT, lower=True, unit="count"),
    "counts/retrieval_scored": _diagnostic("questions every retrieval/* figure averages over (= "
                                           "retrieval/queries_scored)", _COUNT, unit="count"),
    "counts/retrieval_excluded/<name>": _diagnostic(
        "questions out of every retrieval/* mean, by their first reason: unanswerable, no_evidence, "
        "evidence_not_found, not_run", _COUNT, unit="count"),
    "counts/<name>": _diagnostic("the job's sizes (documents, chunks, searchable_chunks, queries, failed_cases, "
                                 "embedded_texts, embedding_dim)", _COUNT, unit="count"),
    "dataset/queries_by_type/<name>": _diagnostic("questions of each type in the evaluation set", _COUNT,
                                                  unit="count"),
    "dataset/<name>": _diagnostic("the dataset adapter's statistics (rows read, dropped, evidence found...)",
                                  "as the adapter counts", unit="count"),
    "time/<name>_s": _diagnostic("wall time of a stage (load, chunk, embed, index, search, cases...), seconds",
                                 "the stage timer", lower=True),
    "retrieval/<name>_at_k_curve": _diagnostic("retrieval/<m>_at_k at every reported cut-off, with k as the step "
                                               "(a line chart)", "copies of retrieval/<m>_at_<k>"),
    # headline/*: a compact set of figures under fixed names, each its source's declaration
    **{name: _copy(src) for name, src in HEADLINE.items()},
}


def at_k_views(metrics: Mapping[str, float], topk: int) -> tuple[dict[str, float], dict[str, dict[int, float]]]:
    """(fixed-name metrics, curves) from the ``retrieval/<m>_at_<k>`` metrics of one job.

    ``retrieval/<m>_at_topk`` is the job's own cut-off under one name, so the columns of a top-k
    sweep line up; ``headline/*`` repeats a compact set of figures that sort together in the UI;
    ``retrieval/<m>_at_k_curve`` holds every reported cut-off with k as the step (a line chart)."""
    curves: dict[str, dict[int, float]] = {}
    for key, value in metrics.items():
        m = _AT_K.match(key)
        if m:
            curves.setdefault(f"retrieval/{m['name']}_at_k_curve", {})[int(m["k"])] = value
    fixed = {f"retrieval/{c.split('/')[1].removesuffix('_at_k_curve')}_at_topk": series[topk]
             for c, series in curves.items() if topk in series}
    # document level (ragbench.judge.document): retrieval/doc/<m>_at_topk, so a top-k sweep's columns line up
    fixed.update({f"retrieval/doc/{m['name']}_at_topk": value for key, value in metrics.items()
                  if (m := _AT_K_DOC.match(key)) and int(m["k"]) == topk})
    merged = {**metrics, **fixed}
    fixed.update({name: merged[src] for name, src in HEADLINE.items() if src in merged})
    return fixed, curves


def logged_metrics(result: JobResult, topk: int) -> Produced:
    """What the tracker adds to the job's metrics: counts, dataset statistics, stage times, and the
    fixed-name views of the job's own top-k (copies of scores keep their kind)."""
    out: dict[str, float] = {}
    for k, v in result.counts.items():
        out[f"counts/{k}"] = float(v)
    for k, v in result.evalset.stats.items():
        out[f"dataset/{k}"] = float(v)
    for t, n in queries_by_type(result.evalset).items():
        out[f"dataset/queries_by_type/{t}"] = float(n)
    for stage, seconds in result.timings.items():
        out[f"time/{stage}_s"] = seconds
    fixed, _ = at_k_views(result.metrics, topk)
    out.update(fixed)
    copies = frozenset(name for name, src in HEADLINE.items() if name in fixed and is_score(src)
                       and not src.startswith("cases/"))  # headline/answer_f1 is answer/f1: a score
    return Produced("logged", out, copies)


def job_metrics(result: JobResult, topk: int) -> dict[str, float]:
    """Every metric the tracker logs for a finished job."""
    return assemble(Produced("job", result.metrics), logged_metrics(result, topk))
