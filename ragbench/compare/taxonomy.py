"""Where each case's gold evidence was lost: not retrieved, ranked below k, dropped by expansion, or
in the context but answered wrong -- and, when the run has claim diagnostics (``judge=[...,claims]``), why
such an answer went wrong (after RAGChecker). Read from what a run's cases.jsonl holds."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragbench.compare.comparison import ALL
from ragbench.compare.runcases import QRELS_FIELDS, RANKED_FIELDS, RunCases

NOT_RETRIEVED, BELOW_K, LOST_BY_EXPANSION = "not_retrieved", "ranked_below_k", "lost_by_expansion"
ANSWERED_WRONG, ANSWERED_RIGHT, FAILED, NO_GOLD = "answered_wrong", "answered_right", "failed", "no_gold_evidence"
CATEGORIES = (NOT_RETRIEVED, BELOW_K, LOST_BY_EXPANSION, ANSWERED_WRONG, ANSWERED_RIGHT, FAILED, NO_GOLD)
CORRECT_AT = 0.5  # an answer scoring at least this (judge accuracy, else answer F1) counts as right
_HIT_AT = re.compile(r"^retrieval/hit_at_(\d+)$")
# why an answered-wrong case (its evidence in the context) went wrong, read from its claim metrics
# (ragbench.judge.claims, after RAGChecker, Ru et al. 2024), in this order of precedence:
HALLUCINATED = "hallucinated"  # judge/claims/hallucination > 0: a claim in neither the gold nor the passages
MISLED_BY_CONTEXT = "misled_by_context"  # judge/claims/noise_sensitivity > 0: a wrong claim taken from a passage
MISSED_EVIDENCE = "missed_evidence_in_context"  # context utilisation < 0.5 and claim recall < 0.5: the gold's
# claims were in the passages, the answer left them out
UNEXPLAINED = "not_explained_by_claims"  # no wrong claim and the evidence used: the claim checker and the
# answer judge disagree
CAUSES = (HALLUCINATED, MISLED_BY_CONTEXT, MISSED_EVIDENCE, UNEXPLAINED)
CLAIM_KEYS = ("judge/claims/hallucination", "judge/claims/noise_sensitivity", "judge/claims/context_utilisation",
              "judge/claims/recall")


@dataclass(frozen=True)
class Taxonomy:
    """Counts per question type (``all`` included) and category, and how they were read."""

    run: str
    run_name: str
    counts: Mapping[str, Mapping[str, int]]
    topk: int | None
    depth: int | None  # how deep the ranked list that separates "below k" from "not retrieved" goes
    source: str
    notes: tuple[str, ...]  # about this run's reading, without the run's name
    # per question type: the answered-wrong cases by CAUSES (empty when the run has no claim metrics)
    causes: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # each case's category, in the run's case order (the report's drill-down reads them, not classify again)
    categories: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def json(self) -> list[dict[str, Any]]:
        return [{"run": self.run, "type": t, "topk": self.topk, "depth": self.depth, "source": self.source,
                 **{c: counts.get(c, 0) for c in CATEGORIES},
                 **({f"{ANSWERED_WRONG}/{c}": self.causes.get(t, {}).get(c, 0) for c in CAUSES} if self.causes else {})}
                for t, counts in self.counts.items()]


def gold_ids(qrels: Any) -> set[str] | None:
    """Relevant ids of a case's qrels: ``{id: grade}``, ``[id, ...]``, or per level
    (``{"chunk": {...}, "unit": {...}}``, the chunk level matching the ranked chunk ids)."""
    if isinstance(qrels, Mapping):
        for level in ("chunk", "chunks"):
            if isinstance(qrels.get(level), Mapping | list):
                return gold_ids(qrels[level])
        if qrels and all(isinstance(v, int | float) and not isinstance(v, bool) for v in qrels.values()):
            return {str(k) for k, v in qrels.items() if v > 0}
        return None if qrels else set()
    if isinstance(qrels, list):
        return {str(x) for x in qrels}
    return None


def _first(row: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    return next((row[n] for n in names if row.get(n) is not None), None)


def unit_flags(row: Mapping[str, Any]) -> tuple[set[str], list[bool]] | None:
    """(the case's gold evidence units, per ranked hit whether it covers one) from the record's ``hit_units``
    and unit qrels -- the rule of the headline ``retrieval/hit_at_k`` and MRR (``judge.ir.covering_metrics``: a
    hit counts when it covers a gold evidence unit, whatever the chunk's level); None when the record lacks them.

    The chunk qrels list only the chunks of the searched levels (``evidence.relevant_searchable``), so a hit
    at another level is never in them: the oracle baseline's hits are the evidence anchors themselves (a
    paragraph when the index searches sentence windows), which cover every gold unit (hit@k = 1) yet match no
    chunk qrel. Read by chunk ids, its cases were "not retrieved"."""
    qrels = row.get("qrels")
    units, covered = qrels.get("unit") if isinstance(qrels, Mapping) else None, row.get("hit_units")
    if not isinstance(units, Mapping) or not isinstance(covered, list):
        return None
    gold = {str(u) for u, g in units.items() if isinstance(g, int | float) and g > 0}
    return gold, [isinstance(c, list) and any(str(u) in gold for u in c) for c in covered]


def gold_flags(row: Mapping[str, Any]) -> list[bool]:
    """Per ranked hit of a case record (``ranked_ids``, else ``retrieved_ids``), whether it brings gold
    evidence: by evidence units (``unit_flags``) when the record has them, else by chunk qrels."""
    ranked = list(row.get("ranked_ids") or row.get("retrieved_ids") or [])
    by_units = unit_flags(row)
    if by_units is not None and len(by_units[1]) >= len(ranked):
        return by_units[1][:len(ranked)]
    qrels = row.get("qrels")
    gold = gold_ids(qrels.get("chunk") if isinstance(qrels, Mapping) else row.get("chunk_qrels")) or set()
    return [str(cid) in gold for cid in ranked]


def _value(run: RunCases, key: str, i: int) -> float:
    col = run.fields.get(key)
    return float("nan") if col is None else float(col[i])


def classify(run: RunCases, i: int, topk: int, metric_depth: int) -> tuple[str, bool]:
    """The category of case ``i``, and whether it was read from qrels and ranked ids."""
    if not run.ok[i]:
        return FAILED, False
    row = run.rows[i] if run.rows else {}
    units = unit_flags(row)
    gold = gold_ids(_first(row, QRELS_FIELDS))
    ranked = _first(row, RANKED_FIELDS) or row.get("retrieved_ids")
    mrr = "retrieval/mrr_at_10" if "retrieval/mrr_at_10" in run.fields else "retrieval/mrr"  # (older runs)
    scored = not np.isnan(_value(run, mrr, i)) or not np.isnan(_value(run, f"retrieval/hit_at_{topk}", i))
    # The headline retrieval metrics count evidence units a hit covers: read that (per hit from the record,
    # else the case's own hit@k); the chunk ids only for a record with neither (they miss a hit at a level
    # the index does not search: the oracle's, see unit_flags).
    by_ids = units is not None or (not scored and gold is not None and isinstance(ranked, list))
    if units is not None:
        if not units[0]:
            return NO_GOLD, True
        in_topk, deeper = any(units[1][:topk]), any(units[1][topk:])
    elif by_ids:
        assert gold is not None and isinstance(ranked, list)
        if not gold:
            return NO_GOLD, True
        in_topk = any(str(x) in gold for x in ranked[:topk])
        deeper = any(str(x) in gold for x in ranked[topk:])
    else:
        if np.isnan(_value(run, mrr, i)):
            return NO_GOLD, False  # the job scores retrieval only for questions with matched evidence
        in_topk = _value(run, f"retrieval/hit_at_{topk}", i) > 0
        deeper = _value(run, mrr, i) > 0 or any(
            _value(run, f"retrieval/hit_at_{j}", i) > 0 for j in range(topk + 1, metric_depth + 1))
    if not in_topk:
        return (BELOW_K if deeper else NOT_RETRIEVED), by_ids
    if _value(run, "context/evidence_text_recall", i) == 0:
        return LOST_BY_EXPANSION, by_ids
    score = _value(run, "judge/accuracy", i)
    if np.isnan(score):
        score = _value(run, "answer/f1", i)
    return (ANSWERED_RIGHT if score >= CORRECT_AT else ANSWERED_WRONG), by_ids


def wrong_cause(run: RunCases, i: int) -> str | None:
    """Why case ``i`` (answered wrong with its evidence in the context) went wrong by its claim metrics
    (``CAUSES``, first that applies); None when the case has no claim metric."""
    hallucination, noise, utilisation, recall = (_value(run, k, i) for k in CLAIM_KEYS)
    if all(np.isnan(x) for x in (hallucination, noise, utilisation, recall)):
        return None
    if hallucination > 0:
        return HALLUCINATED
    if noise > 0:
        return MISLED_BY_CONTEXT
    if utilisation < CORRECT_AT and not recall >= CORRECT_AT:  # NaN utilisation: no gold claim in the passages
        return MISSED_EVIDENCE
    return UNEXPLAINED


def taxonomy(run: RunCases) -> Taxonomy:
    """The failure taxonomy of one run, overall and per question type."""
    ks = [int(m[1]) for k in run.fields if (m := _HIT_AT.match(k))]
    metric_depth = max(ks, default=0)  # the job scores ranks down to max(1, 3, 5, 10, top-k)
    ranked_len = max((len(r.get("retrieved_ids") or []) for r in run.rows), default=0)
    topk = run.topk or ranked_len or metric_depth
    notes: list[str] = []
    per_case = [classify(run, i, topk, metric_depth) for i in range(len(run.qids))]
    from_ids = sum(by_ids for _, by_ids in per_case)
    deep = max((len(_first(r, RANKED_FIELDS) or r.get("hit_units") or []) for r in run.rows), default=0)
    if from_ids:
        source, depth = "qrels and ranked ids in cases.jsonl", max(deep, ranked_len)
    else:
        source, depth = "per-case retrieval metrics (hit@k, MRR; no per-hit evidence units read)", max(metric_depth, topk)
    if depth <= topk:
        notes.append(f"the ranked list is stored only to depth {depth} = top-k, so '{BELOW_K}' cannot be told "
                     f"apart from '{NOT_RETRIEVED}' (gold not in the top {depth}); cases.jsonl with deeper ranked "
                     "ids and qrels separates them")
    counts: dict[str, Counter] = {ALL: Counter()}
    for qtype, (category, _) in zip(run.types, per_case, strict=True):
        counts[ALL][category] += 1
        counts.setdefault(qtype, Counter())[category] += 1
    ordered = {ALL: counts[ALL], **{t: counts[t] for t in sorted(counts) if t != ALL}}
    causes: dict[str, Counter] = {}
    if any(k in run.fields for k in CLAIM_KEYS):
        causes = {t: Counter() for t in ordered}
        for i, (qtype, (category, _)) in enumerate(zip(run.types, per_case, strict=True)):
            cause = wrong_cause(run, i) if category == ANSWERED_WRONG else None
            if cause is not None:
                causes[ALL][cause] += 1
                causes[qtype][cause] += 1
        wrong, why = counts[ALL][ANSWERED_WRONG], causes[ALL]
        notes.append(f"of the {wrong} answered wrong with the evidence in the context, {sum(why.values())} have claim "
                     f"diagnostics: {why[HALLUCINATED]} {HALLUCINATED} (a claim in neither the gold nor the passages), "
                     f"{why[MISLED_BY_CONTEXT]} {MISLED_BY_CONTEXT} (a wrong claim taken from a passage), "
                     f"{why[MISSED_EVIDENCE]} {MISSED_EVIDENCE} (context utilisation and claim recall < {CORRECT_AT}), "
                     f"{why[UNEXPLAINED]} {UNEXPLAINED}")
    return Taxonomy(run=run.run_id, run_name=run.name, counts={t: dict(c) for t, c in ordered.items()},
                    topk=topk, depth=depth, source=source, notes=tuple(notes),
                    causes={t: dict(c) for t, c in causes.items()},
                    categories=tuple(category for category, _ in per_case))
