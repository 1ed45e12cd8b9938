"""Terminal rendering (rich): the job summary block and the sweep comparison table."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

# Off a terminal (CI logs, pipes) rich would assume 80 columns and squeeze the tables.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 140)

HEADLINE = (
    "retrieval/hit_at_1", "retrieval/hit_at_5", "retrieval/recall_at_5", "retrieval/mrr", "retrieval/ndcg_at_5",
    "retrieval/evidence_text_recall", "context/evidence_text_recall", "context/openviking_recall", "answer/em",
    "answer/f1", "answer/locomo_f1", "judge/accuracy",
    "answer/refusal_accuracy", "answer/false_refusal_rate",
)
TYPE_COLUMNS = ("cases/total", "cases/failed", "retrieval/hit_at_5", "retrieval/mrr", "answer/f1", "judge/accuracy")


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1:
        return f"{int(value):,}"
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def job_summary(*, title: str, metrics: Mapping[str, float], fingerprints: Mapping[str, str],
                counts: Mapping[str, int], timings: Mapping[str, float], run_id: str | None) -> None:
    """EasyRAG-style block: status counts, fingerprints, retrieval and answer metrics, per-type table."""
    head = Table(title=title, show_header=False, title_justify="left")
    head.add_column("key", style="bold")
    head.add_column("value")
    total = int(metrics.get("cases/total", 0))
    failed = int(metrics.get("cases/failed", 0))
    head.add_row("cases", f"{total} total, {total - failed} ok, {failed} failed "
                          f"({metrics.get('cases/failure_rate', 0.0):.1%})")
    head.add_row("corpus", ", ".join(f"{k}={v}" for k, v in counts.items()))
    for k, v in fingerprints.items():
        head.add_row(k, v)
    head.add_row("time", ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()))
    if run_id:
        head.add_row("mlflow run", run_id)
    console.print(head)
    body = Table(show_header=True, title_justify="left")
    body.add_column("metric")
    body.add_column("end-to-end", justify="right")
    body.add_column("successful only", justify="right")
    for key in HEADLINE:
        if key in metrics:
            ok = metrics.get(f"{key}_successful")
            body.add_row(key, _fmt(metrics[key]), _fmt(ok) if ok is not None else "")
    console.print(body)
    types = sorted({k.split("/")[1] for k in metrics if k.startswith("by_type/")})
    if types:
        table = Table(title="by question type", title_justify="left")
        table.add_column("type")
        cols = [c for c in TYPE_COLUMNS if any(f"by_type/{t}/{c}" in metrics for t in types)]
        for c in cols:
            table.add_column(c, justify="right")
        for t in types:
            table.add_row(t, *(_fmt(metrics.get(f"by_type/{t}/{c}", "")) for c in cols))
        console.print(table)


def comparison_table(rows: Sequence[Mapping[str, Any]], columns: Mapping[str, str], *, title: str) -> None:
    """Jobs x metrics, already sorted best first; ``columns`` maps row keys to column labels."""
    table = Table(title=title, title_justify="left")
    for c, label in columns.items():
        wraps = c in ("run", "job")  # only the job label may wrap; status and numbers never shrink
        table.add_column(label, justify="left" if wraps or c == "status" else "right", no_wrap=not wraps,
                         overflow="fold", min_width=None if wraps else max(len(label), 8))
    for row in rows:
        table.add_row(*(_fmt(row.get(c, "")) for c in columns))
    console.print(table)
