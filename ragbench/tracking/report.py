"""Terminal rendering (rich): the job summary block and the sweep comparison table."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ragbench.judge.aggregate import FAILED_BY, coverage
from ragbench.tracking.runs_table import tied

# Off a terminal (CI logs, pipes) rich would assume 80 columns and squeeze the tables.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 140)

HEADLINE = (
    "retrieval/hit_at_1", "retrieval/hit_at_5", "retrieval/recall_at_5", "retrieval/mrr_at_10", "retrieval/ndcg_at_5",
    "retrieval/evidence_text_recall", "context/evidence_text_recall", "context/openviking_recall", "answer/em",
    "answer/f1", "answer/contains", "retrieval/doc_recall_at_5", "rerank/fallbacks", "answer/locomo_f1",
    "answer/locomo_f1_official", "judge/accuracy",
    "answer/refusal_accuracy", "answer/false_refusal_rate",
)
TYPE_COLUMNS = {"cases/total": "cases", "cases/failed": "failed", "retrieval/hit_at_5": "hit@5",
                "retrieval/mrr_at_10": "mrr@10", "answer/f1": "f1", "judge/accuracy": "judge"}  # key -> label
EXCLUDED = "counts/retrieval_excluded/"


def retrieval_scope(metrics: Mapping[str, float]) -> str | None:
    """The summary's line on the questions retrieval is scored on: ``54 of 84 questions (out: 12
    unanswerable, 18 evidence not found)``; None when the job did not count them."""
    if "counts/retrieval_scored" not in metrics:
        return None
    scored = int(metrics["counts/retrieval_scored"])
    out = {k[len(EXCLUDED):].replace("_", " "): int(v) for k, v in metrics.items() if k.startswith(EXCLUDED) and v}
    total = scored + sum(out.values())
    why = ", ".join(f"{n} {reason}" for reason, n in out.items())
    return f"{scored} of {total} questions" + (f" (out: {why})" if why else "")


COUNT_PREFIXES = ("cases/", "counts/", "sweep/", "dataset/", "evidence/", "ingest/")
NOT_COUNT_SUFFIXES = ("rate", "ratio", "share", "mean", "_s", "_ms")


def is_count(key: str) -> bool:
    """Whether a metric counts things (printed as an integer: ``0``, never ``0.0000``)."""
    core = key.split("/", 2)[2] if key.startswith("by_type/") and key.count("/") >= 2 else key
    return core.startswith(COUNT_PREFIXES) and not core.endswith(NOT_COUNT_SUFFIXES)


def _fmt(value: Any, key: str = "") -> str:
    """A cell: counts as integers, scores with 4 decimals; text escaped so rich never reads it as markup."""
    if isinstance(value, float) and (is_count(key) or value.is_integer() and abs(value) > 1):
        return f"{value:,.0f}"
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 1000 else f"{value:,.0f}"
    return escape(str(value))


def at_topk_rows(metrics: Mapping[str, float], topk: int | None) -> list[str]:
    """The summary's first rows: nDCG, recall and hit at the job's own top-k, led by the document-level ones
    (and nDCG@10, the published tables' figure) when the dataset judges relevance per document."""
    if topk is None:
        return []
    names = ("ndcg", "recall", "hit")
    doc = [f"retrieval/doc/{m}_at_{topk}" for m in names] if f"retrieval/doc/ndcg_at_{topk}" in metrics else []
    if doc and topk > 10:
        doc.insert(0, "retrieval/doc/ndcg_at_10")
    return [*doc, *(f"retrieval/{m}_at_{topk}" for m in names)]


NOT_JUDGED = "not judged"


def judge_cell(metrics: Mapping[str, float], key: str) -> str:
    """An LLM judge score's cell in a narrow table (the coverage is in the judge table): its value, or ``not
    judged`` when no case was (coverage 0), never 0.0000."""
    cov = coverage(metrics, key)
    if key not in metrics or cov == 0.0:
        return NOT_JUDGED if cov is not None else ""
    return _fmt(metrics[key], key)


def judge_rows(metrics: Mapping[str, float]) -> list[tuple[str, str, str, str]]:
    """(score, end-to-end, successful only, coverage) of every LLM judge score the job logged or asked for in
    vain (``judge/score`` is ``judge/accuracy`` on its 0-4 scale: left out). A judge with coverage 0 (no
    verdict parsed) or no judged case at all reads ``not judged``."""
    rows = []
    for key in FAILED_BY:
        cov = coverage(metrics, key)
        if key == "judge/score" or (key not in metrics and cov != 0.0):
            continue  # (a claim ratio whose denominator no case had is absent, its judge's coverage > 0)
        ok = metrics.get(f"{key}_successful")
        shown = "-" if cov is None else f"{cov:.0%}"
        if key not in metrics or cov == 0.0 or (cov is None and ok is None):
            rows.append((key, NOT_JUDGED, "", shown))
        else:
            rows.append((key, _fmt(metrics[key], key), _fmt(ok, key) if ok is not None else "", shown))
    return rows


def job_summary(*, title: str, metrics: Mapping[str, float], fingerprints: Mapping[str, str],
                counts: Mapping[str, int], timings: Mapping[str, float], run_id: str | None,
                topk: int | None = None) -> None:
    """EasyRAG-style block: status counts, fingerprints, retrieval and answer metrics, per-type table."""
    head = Table(title=escape(title), show_header=False, title_justify="left")
    head.add_column("key", style="bold")
    head.add_column("value")
    total = int(metrics.get("cases/total", 0))
    failed = int(metrics.get("cases/failed", 0))
    head.add_row("cases", f"{total} total, {total - failed} ok, {failed} failed "
                          f"({metrics.get('cases/failure_rate', 0.0):.1%})")
    head.add_row("corpus", ", ".join(f"{k}={v}" for k, v in counts.items()))
    if (scope := retrieval_scope(metrics)) is not None:  # what every retrieval/* figure averages over
        head.add_row("retrieval scored on", scope)
    for k, v in fingerprints.items():
        head.add_row(k, escape(str(v)))
    head.add_row("time", ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()))
    if run_id:
        head.add_row("mlflow run", run_id)
    console.print(head)
    body = Table(show_header=True, title_justify="left")
    body.add_column("metric")
    body.add_column("end-to-end", justify="right")
    body.add_column("successful only", justify="right")
    lead = at_topk_rows(metrics, topk)
    for key in (*lead, *(k for k in HEADLINE if k not in lead)):
        if key in metrics and key not in FAILED_BY:  # an LLM judge's scores: in the judge table, with coverage
            ok = metrics.get(f"{key}_successful")
            body.add_row(key, _fmt(metrics[key], key), _fmt(ok, key) if ok is not None else "")
    console.print(body)
    if judged := judge_rows(metrics):
        judges = Table(title="LLM judges (coverage: share of the cases judged)", title_justify="left")
        for name in ("judge score", "end-to-end", "successful only", "coverage"):
            judges.add_column(name, justify="left" if name == "judge score" else "right")
        for row in judged:
            judges.add_row(*row)
        console.print(judges)
    for family, what, first in (("by_type", "question type", "type"), ("by_tag", "tag", "tag"),  # tags: custom sets
                                ("by_turn", "conversation turn", "turn")):
        types = sorted({k.split("/")[1] for k in metrics if k.startswith(f"{family}/")})
        if not types:  # by_turn: only a dataset of conversations (ragbench.judge.conversation)
            continue
        cols = [c for c in TYPE_COLUMNS if any(f"{family}/{t}/{c}" in metrics for t in types)]
        said = ", ".join(f"{TYPE_COLUMNS[c]} = {c}" for c in cols if not c.startswith("cases/"))
        table = Table(title=f"by {what} ({said})" if said else f"by {what}", title_justify="left")
        table.add_column(first, overflow="fold")
        for c in cols:
            table.add_column(TYPE_COLUMNS[c], justify="right", no_wrap=True)
        for t in types:
            table.add_row(escape(t), *(judge_cell(metrics, f"{family}/{t}/{c}") if c in FAILED_BY
                                       else _fmt(metrics.get(f"{family}/{t}/{c}", ""), c) for c in cols))
        console.print(table)


def rank_within_dataset(rows: list[dict[str, Any]], sort_by: str) -> list[dict[str, Any]]:
    """Rows grouped by dataset (datasets in name order), best ``sort_by`` first inside each group,
    failed jobs last; each row gets its ``rank`` within its dataset (rows tied on ``sort_by`` share the first
    one's and are marked ``tied``). Scores of two datasets are not
    comparable, so a rank across them would mean nothing. Baselines (a ``baseline`` kind: retrieval=oracle
    or none) come after the configurations, unranked (``rank`` None): a bound, not a competitor."""
    order = {name: i for i, name in enumerate(sorted({str(r.get("dataset", "")) for r in rows}))}

    def key(r: Mapping[str, Any]) -> tuple[int, bool, bool, float]:
        score = r.get(sort_by)
        return (order[str(r.get("dataset", ""))], bool(r.get("baseline")), r.get("status") != "FINISHED",
                -float(score) if isinstance(score, int | float) else float("inf"))

    out = sorted(rows, key=key)
    seen: dict[str, int] = {}
    last: dict[str, dict[str, Any]] = {}
    for r in out:
        ds = str(r.get("dataset", ""))
        if r.get("baseline"):
            r["rank"] = None
            continue
        seen[ds] = seen.get(ds, 0) + 1
        before = last.get(ds)
        r["rank"] = seen[ds]
        if before is not None and tied(before.get(sort_by), r.get(sort_by)):  # a tie shares the first rank
            r["rank"] = before["rank"]
            before["tied"] = r["tied"] = True
        last[ds] = r
    return out


def comparison_table(rows: Sequence[Mapping[str, Any]], columns: Mapping[str, str], *, title: str) -> None:
    """Jobs x metrics, already sorted best first; ``columns`` maps row keys to column labels."""
    table = Table(title=escape(title), title_justify="left")
    for c, label in columns.items():
        wraps = c in ("run", "job")  # only the job label may wrap; status and numbers never shrink
        left = wraps or c in ("status", "dataset")
        table.add_column(label, justify="left" if left else "right", no_wrap=not wraps,
                         overflow="fold", min_width=None if wraps else max(len(label), 8))
    for row in rows:
        table.add_row(*(_fmt(row.get(c, ""), c) for c in columns))
    console.print(table)
