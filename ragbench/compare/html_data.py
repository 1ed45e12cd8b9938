"""The data of the HTML report (``ragbench.compare.html``): sweep table rows, @k curves, and the per-question
drill-down read from the runs' ``cases.jsonl`` records, each text stored once however many runs show it."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragbench.compare.comparison import Comparison
from ragbench.compare.metrics import metric_spec
from ragbench.compare.runcases import RunCases
from ragbench.compare.select import _download, case_rows
from ragbench.compare.taxonomy import CORRECT_AT, Taxonomy, classify, gold_flags
from ragbench.errors import RagbenchError
from ragbench.repeats import record_runs
from ragbench.tracking.run_names import WHERE_KEYS
from ragbench.tracking.runs_table import baseline_kind as baseline_of_tags

TABLE_METRICS = {  # the sweep table's metric columns: logged key -> label
    "answer/f1": "F1", "retrieval/hit_at_topk": "hit@k", "retrieval/mrr_at_10": "MRR@10", "retrieval/mrr": "MRR",
    "context/evidence_text_recall": "context ev. recall", "answer/em": "EM", "judge/accuracy": "judge acc.",
    "retrieval/recall_at_topk": "recall@k", "retrieval/doc/ndcg_at_10": "doc nDCG@10",
    "retrieval/doc/ndcg_at_topk": "doc nDCG@k", "cases/total": "cases", "cases/failed": "failed",
}
CURVES = {"retrieval/hit_at_": "hit@k", "retrieval/recall_at_": "recall@k", "retrieval/ndcg_at_": "nDCG@k"}
CASE_SCORES = ("answer/f1", "answer/em", "judge/accuracy", "retrieval/mrr_at_10", "retrieval/mrr",  # (older runs)
               "context/evidence_text_recall")
TARGET = "_target_"  # a component's class in a config (Hydra's instantiate key)
BASELINE_RETRIEVERS = {"Oracle": "oracle", "ClosedBook": "closed_book"}  # retrieval.retriever._target_'s class
MAX_TEXT = 4000  # characters of one hit or context text kept in the report
MAX_RANKED = 10  # ranked ids shown per case beyond the top-k texts
_AT = re.compile(r"^(retrieval/(?:hit|recall|ndcg)_at_)(\d+)$")


def load_records(client: Any, runs: Sequence[Any],
                 read: Sequence[RunCases] = ()) -> dict[str, Sequence[Mapping[str, Any]]]:
    """Each MLflow run's ``cases.jsonl`` rows (run id -> rows), for the drill-down: those the comparison
    already read from the run's record (``read``) as they are (shared, not copied: the drill-down only reads
    them), the others read now; a run whose file cannot be read has none (the report shows its scores only)."""
    out: dict[str, Sequence[Mapping[str, Any]]] = {rc.run_id: rc.rows for rc in read
                                                   if rc.rows and "question" in rc.rows[0]}  # whole records
    for run in runs:
        if str(run.info.run_id) in out:
            continue
        try:
            text = _download(client, run, "cases.jsonl")
            out[str(run.info.run_id)] = case_rows(text, str(run.info.run_id))
        except (RagbenchError, ValueError):
            out[str(run.info.run_id)] = []
    return out


def run_tags(runs: Sequence[Any]) -> dict[str, dict[str, str]]:
    """MLflow run id -> its tags (the baseline kind is ``ragbench.baseline``)."""
    return {str(r.info.run_id): dict(r.data.tags) for r in runs}


def baseline_kind(run: RunCases, tags: Mapping[str, str] | None = None) -> str:
    """``oracle`` / ``closed_book`` for a baseline run (``runs_table.baseline_kind`` of its record's tags, as
    compare's default baseline reads it; else, for a run logged before that tag, its config's retriever),
    else "". Never its run name."""
    if run.baseline or (tags and baseline_of_tags(tags)):
        return run.baseline or baseline_of_tags(tags or {})
    target = run.params.get("retrieval.retriever._target_", "")
    return BASELINE_RETRIEVERS.get(target.rpartition(".")[2], "")


def varying_params(runs: Sequence[RunCases]) -> tuple[list[str], dict[str, dict[str, str]]]:
    """(column names, run id -> {column: value}): the config keys (``RunCases.params``, read from each run's
    record) whose value differs between the runs of one dataset, in config order, without the keys that say
    where results go (``cache.dir``); a key shows by its last segment (``topk``) where no other column has
    it, a component's ``_target_`` as the component with its class (``retriever``: ``BM25``). The run names
    are not read: a name that disagrees with its record does not change a column."""
    by_dataset: dict[str, list[RunCases]] = {}
    for r in runs:
        by_dataset.setdefault(r.dataset, []).append(r)
    keys: dict[str, None] = {}
    for group in by_dataset.values():
        for key in dict.fromkeys(k for r in group for k in r.params):
            if not key.startswith(WHERE_KEYS) and len({r.params.get(key, "") for r in group}) > 1:
                keys[key] = None
    shown = {k: k.removesuffix(f".{TARGET}") for k in keys}
    tails = [k.rsplit(".", 1)[-1] for k in shown.values()]
    short = {k: t if tails.count(t) == 1 else shown[k] for k, t in zip(keys, tails, strict=True)}

    def value(key: str, text: str) -> str:
        return text.rpartition(".")[2] if key.endswith(f".{TARGET}") else text

    return list(short.values()), {r.run_id: {short[k]: value(k, r.params.get(k, "")) for k in keys} for r in runs}


def _clean(x: float) -> float | None:
    return round(float(x), 6) if x == x and math.isfinite(x) else None


def run_value(run: RunCases, key: str) -> float | None:
    """The run's logged value of ``key`` (``metrics``), else the mean of its per-case values."""
    if key in run.metrics:
        return _clean(run.metrics[key])
    per_case = key.replace("_at_topk", f"_at_{run.topk}") if run.topk else key
    if per_case not in run.fields:
        return None
    x = run.values(metric_spec(per_case))
    x = x[np.isfinite(x)]
    return _clean(float(x.mean())) if len(x) else None


def table_rows(comp: Comparison, labels: Mapping[str, str], tags: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """The sweep table: ``columns`` (params then metrics) and per dataset its configurations and baselines."""
    vary, params = varying_params(comp.runs)
    metrics = [m for m in TABLE_METRICS if any(run_value(r, m) is not None for r in comp.runs)]
    metrics = sorted(metrics, key=lambda m: m != comp.rank_by)  # the ranking metric first: the table's order
    out: dict[str, Any] = {"params": vary, "metrics": [[m, TABLE_METRICS[m]] for m in metrics], "datasets": {}}
    for r in comp.runs:
        kind = baseline_kind(r, tags.get(r.run_id))
        row = {"run": r.run_id, "label": labels.get(r.run_id, r.name), "name": r.name, "baseline": kind,
               "params": params[r.run_id], "values": {m: run_value(r, m) for m in metrics},
               "reference": comp.baseline_of[r.run_id].run_id == r.run_id}
        out["datasets"].setdefault(r.dataset, []).append(row)
    return out


def curves(runs: Sequence[RunCases]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """dataset -> curve label -> one series per run: points (k, mean per-case value), k on the axis."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in runs:
        series: dict[str, list[list[float]]] = {}
        for key in r.fields:
            m = _AT.match(key)
            if not m:
                continue
            x = r.values(metric_spec(key))
            x = x[np.isfinite(x)]
            if len(x):
                series.setdefault(m[1], []).append([int(m[2]), round(float(x.mean()), 6)])
        for prefix, pts in series.items():
            if len(pts) > 1:
                out.setdefault(r.dataset, {}).setdefault(CURVES[prefix], []).append(
                    {"run": r.run_id, "points": sorted(pts)})
    return out


class _Pool:
    """Texts stored once: a hit's chunk text is the same in every run that ranks it."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._at: dict[str, int] = {}

    def add(self, text: Any) -> int:
        t = str(text or "")
        if len(t) > MAX_TEXT:
            t = t[:MAX_TEXT] + f" … [{len(t) - MAX_TEXT} more characters in cases.jsonl]"
        if t not in self._at:
            self._at[t] = len(self.texts)
            self.texts.append(t)
        return self._at[t]


def _categories(run: RunCases, taxon: Taxonomy) -> list[str]:
    if len(taxon.categories) == len(run.qids):  # classified by ``taxonomy`` with these same arguments
        return list(taxon.categories)
    ks = [int(m[2]) for k in run.fields if (m := _AT.match(k)) and m[1] == "retrieval/hit_at_"]
    topk = taxon.topk or 0
    return [classify(run, i, topk, max(ks, default=0))[0] for i in range(len(run.qids))]


def _right(run: RunCases, i: int) -> bool | None:
    for key in ("judge/accuracy", "answer/f1"):
        col = run.fields.get(key)
        if col is not None and not np.isnan(col[i]):
            return bool(col[i] >= CORRECT_AT)
    return None


def _case(run: RunCases, i: int, row: Mapping[str, Any], category: str, pool: _Pool) -> dict[str, Any]:
    scores = {k: v for k in CASE_SCORES if (v := _clean(float(run.fields[k][i])) if k in run.fields else None) is not None}
    topk = int(row.get("topk") or run.topk or 0)
    if topk and f"retrieval/hit_at_{topk}" in run.fields:
        v = _clean(float(run.fields[f"retrieval/hit_at_{topk}"][i]))
        if v is not None:
            scores["retrieval/hit_at_topk"] = v
    ranked = list(row.get("ranked_ids") or row.get("retrieved_ids") or [])
    gold = gold_flags(row)  # by evidence unit, as hit@k: the oracle's anchors are gold though in no chunk qrel
    docs = list(row.get("ranked_doc_ids") or [])
    texts = list(row.get("topk_texts") or [])
    hits = [[str(cid), str(docs[j]) if j < len(docs) else "", int(gold[j]),
             pool.add(texts[j]) if j < len(texts) else -1] for j, cid in enumerate(ranked[:max(topk, MAX_RANKED)])]
    contexts = [[pool.add(c.get("text")), str(c.get("title") or ""), int(bool(c.get("has_evidence")))]
                for c in row.get("contexts") or [] if isinstance(c, Mapping)]
    out: dict[str, Any] = {"a": row.get("answer"), "s": scores, "c": category, "r": _right(run, i), "k": topk,
                           "h": hits, "x": contexts, "j": row.get("judge_notes") or {}}
    if row.get("status", "ok") != "ok":
        out["e"] = f"{row.get('status')}: {row.get('error_type') or ''} {row.get('error') or ''}".strip()
    spread = repeat_spread(row, pool)
    if spread is not None:
        out["rp"] = spread
    return out


def repeat_spread(row: Mapping[str, Any], pool: _Pool) -> dict[str, Any] | None:
    """``repeats=N``: a case's spread over its repeats -- per answer score (the drill-down's, else every one
    the repeats hold) [min, max, sd (ddof 0)] -- with the reducer and each repeat's answer; None without."""
    got = record_runs(row)
    if got is None:
        return None
    reducer, runs = got
    keys = sorted({k for r in runs for k in (r.get("scores") or {}) if not k.endswith("judge_failed")})
    shown = [k for k in CASE_SCORES if k in keys] or keys
    spread: dict[str, list[float]] = {}
    for key in shown:
        vals = [float(r["scores"][key]) for r in runs if isinstance((r.get("scores") or {}).get(key), int | float)]
        vals = [v for v in vals if np.isfinite(v)]
        if vals:
            spread[key] = [min(vals), max(vals), float(np.std(vals))]
    return {"n": len(runs), "r": reducer, "s": spread, "a": [pool.add(r.get("answer")) for r in runs]}


def drilldown(comp: Comparison, taxa: Sequence[Taxonomy],
              records: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Per dataset: its questions once (text, gold answers, evidence), and per run one entry per question
    (answer, scores, category, hits with gold flags, contexts, judge notes) or None where the run lacks it.
    ``records``: run id -> its ``cases.jsonl`` rows (a run without them shows its scores only)."""
    pool = _Pool()
    taxon = {t.run: t for t in taxa}
    out: dict[str, Any] = {}
    for ds in sorted({r.dataset for r in comp.runs}):
        runs = [r for r in comp.runs if r.dataset == ds]
        questions: dict[str, dict[str, Any]] = {}
        for r in runs:
            rows = {str(row.get("qid")): row for row in records.get(r.run_id, ())}
            for i, qid in enumerate(r.qids):
                row = rows.get(qid, {})
                q = questions.setdefault(qid, {"q": qid, "t": r.types[i], "text": None, "gold": [], "ev": []})
                if q["text"] is None and row:
                    q["text"] = row.get("question")
                    q["gold"] = list(row.get("answers") or ([row["gold"]] if row.get("gold") else []))
                    ev = row.get("evidence")
                    q["ev"] = [pool.add(t) for t in (ev.get("texts") or [])] if isinstance(ev, Mapping) else []
        order = {qid: n for n, qid in enumerate(questions)}
        cases: dict[str, list[Any]] = {}
        for r in runs:
            rows = {str(row.get("qid")): row for row in records.get(r.run_id, ())}
            cats = _categories(r, taxon[r.run_id]) if r.run_id in taxon else [""] * len(r.qids)
            entry: list[Any] = [None] * len(questions)
            for i, qid in enumerate(r.qids):
                entry[order[qid]] = _case(r, i, rows.get(qid, {}), cats[i], pool)
            cases[r.run_id] = entry
        out[ds] = {"runs": [r.run_id for r in runs], "questions": list(questions.values()), "cases": cases}
    return {"datasets": out, "texts": pool.texts}
