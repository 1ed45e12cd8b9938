"""A sweep's runs as rows: the terminal table that fits 80 columns (configurations ranked, baselines apart,
the rest of the metrics in a second table) and ``runs.csv`` (one row per run: params and headline metrics)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ragbench.metric_keys import find, sweep_columns, sweep_ranks
from ragbench.tracking.run_names import short_items

# metric -> short column label for the terminal, most telling first: the columns the declarations supply
# (``MetricInfo.columns``; the job's own top-k under one name, so in a top-k sweep these columns differ)
KEY_METRICS = {c.key: c.label for c in sweep_columns()}
CSV_PARAMS = ("dataset.name", "retrieval.topk")  # always in runs.csv, beside the params that vary
BASELINE_TAG = "ragbench.baseline"  # a baseline job's kind (ragbench.retrieval.baselines): closed_book | oracle
AUTO = "auto"
# the ranking roles the declarations supply (``MetricInfo.ranks``): relevance judged per document leads (the
# published tables' nDCG@10, else nDCG at the job's k), else the answer score; a retrieval-only sweep
# (stages=retrieval) has no answer score and falls back to the retrieval one
DOC_LEAD = tuple(sweep_ranks("lead"))
(AUTO_ANSWER,) = sweep_ranks("answer")
(RANK_FALLBACK,) = sweep_ranks("fallback")
CSV_METRICS = tuple(dict.fromkeys(("cases/total", "cases/failed", *KEY_METRICS)))
_CELL = 6  # "0.4321"
_LABEL_MAX = 30


def baseline_kind(tags: Mapping[str, Any]) -> str:
    """A run's baseline kind from its tags (``oracle``, ``closed_book``), "" for a configuration. The one test
    of "is this a baseline": the sweep table lists baselines apart and unranked, and ``ragbench.compare`` never
    takes one as the default baseline (a bound on the configurations, not one of them)."""
    return str(tags.get(BASELINE_TAG) or "")


def ranking_metric(rows: Sequence[Mapping[str, Any]], sort_by: str = AUTO) -> str:
    """The metric that ranks a sweep's configurations -- the sweep table's order and ``ragbench.compare``'s
    default baseline (its best configuration) both read it here, so a sweep has one "best".

    ``rows``: each run's logged metrics (a row may also hold ``status`` and ``baseline``, a ``baseline_kind``);
    the configurations decide, the baselines only when there is none. ``sort_by`` when some row has it, else
    ``RANK_FALLBACK`` when some row has that: a table ranked on a metric no job logged would rank nothing while
    its title said otherwise. ``auto`` (the default): the document-level figure (``DOC_LEAD``) when every
    finished configuration has it (the dataset judges relevance per document: BEIR, MultiHop-RAG, FinanceBench
    in corpus scope), else ``answer/f1`` (the jobs answer), else ``RANK_FALLBACK`` (retrieval only)."""
    rows = [r for r in rows if not r.get("baseline")] or list(rows)
    if sort_by == AUTO:
        done = [r for r in rows if r.get("status", "FINISHED") == "FINISHED"]
        lead = next((m for m in DOC_LEAD if done and all(m in r for r in done)), None)
        sort_by = lead or AUTO_ANSWER
    if any(sort_by in r for r in rows) or not any(RANK_FALLBACK in r for r in rows):
        return sort_by
    return RANK_FALLBACK


def short_label(label: str) -> str:
    """A job label with its keys shortened (``retrieval.topk=5`` -> ``topk=5``) and the job number last."""
    words = [w for w in label.split(" ") if w]
    items = [w for w in words if not w.startswith("#")]
    return " ".join([*short_items(items), *(w for w in words if w.startswith("#"))])


def _fmt(value: Any, key: str) -> str:
    if not isinstance(value, int | float):
        return "-"
    info = find(key)
    if info is not None and info.unit == "count":
        return f"{value:,.0f}"
    return f"{value:.4f}" if abs(value) < 1000 else f"{value:,.0f}"


def _columns(rows: Sequence[Mapping[str, Any]], sort_by: str) -> list[tuple[str, str]]:
    """(metric, label) of every metric some row has: the ranking metric first, then the ones that differ
    between the rows, then the ones every row has the same value of."""
    keys = [sort_by, *(m for m in KEY_METRICS if m != sort_by)]
    keys = [m for m in keys if any(isinstance(r.get(m), int | float) for r in rows)]
    flat = {m for m in keys[1:] if len({r.get(m) for r in rows}) == 1}
    keys = sorted(keys, key=lambda m: m in flat)
    return [(m, KEY_METRICS.get(m, m.rsplit("/", 1)[-1]) + (" ▼" if m == sort_by else "")) for m in keys]


Column = tuple[str, str]  # (metric key, label)


def split_columns(columns: Sequence[Column], label_width: int, width: int) -> tuple[list[Column], list[Column]]:
    """The columns that fit ``width`` beside the rank and label columns (the first always does), and the rest."""
    used = 1 + (2 + 3) + (label_width + 3)  # rich's borders and padding: 3 a column, 1 at the end
    fit: list[Column] = []
    rest: list[Column] = []
    for col in columns:
        need = max(len(col[1]), _CELL) + 3
        if not fit or (not rest and used + need <= width):
            fit.append(col)
            used += need
        else:
            rest.append(col)
    return fit, rest


def sweep_tables(rows: Sequence[Mapping[str, Any]], sort_by: str, *, width: int, title: str) -> list[Table]:
    """Per dataset: its configurations ranked on ``sort_by`` (rows already ranked), its baselines
    (``retrieval=oracle|none``) below a line and unranked; metrics that do not fit ``width`` in a second table."""
    datasets = list(dict.fromkeys(str(r.get("dataset", "")) for r in rows))
    labels = {}
    for r in rows:
        label = short_label(str(r.get("label") or r.get("run") or ""))
        if r.get("baseline"):  # "oracle baseline topk=5 #3": the kind first, its retrieval= item dropped
            label = " ".join([f"{r['baseline']} baseline", *(w for w in label.split(" ")
                                                              if w != f"retrieval={r['baseline']}")])
        elif r.get("status", "FINISHED") != "FINISHED":
            label += f" {r['status']}"
        labels[id(r)] = label
    label_width = max(min(max((len(v) for v in labels.values()), default=4), _LABEL_MAX), 10)
    fit, rest = split_columns(_columns(rows, sort_by), label_width, width)
    tables = []
    for part, cols in (("", fit), (", more metrics", rest)):
        if not cols:
            continue
        for ds in datasets:
            group = [r for r in rows if str(r.get("dataset", "")) == ds]
            configs = [r for r in group if not r.get("baseline")]
            bases = [r for r in group if r.get("baseline")]
            head = f"{ds or 'runs'}{part}: {len(configs)} configurations, best {sort_by} first"
            if bases:
                head += f", {len(bases)} baseline{'s' if len(bases) > 1 else ''}"
            if part:
                head = f"{ds or 'runs'}{part}"
            table = Table(title=escape(f"{title}\n{head}" if title and not part and ds == datasets[0] else head),
                          title_justify="left")
            table.add_column("#", justify="right", no_wrap=True, min_width=2)
            table.add_column("job", no_wrap=True, overflow="ellipsis", max_width=label_width, min_width=label_width)
            for _, label in cols:
                table.add_column(escape(label), justify="right", no_wrap=True, min_width=max(len(label), _CELL))
            for i, r in enumerate(configs, start=1):
                table.add_row(str(i), escape(labels[id(r)]), *(_fmt(r.get(m), m) for m, _ in cols),
                              end_section=bool(bases) and i == len(configs))
            for r in bases:  # below the line, unranked: a bound on the configurations, not one of them
                table.add_row("-", escape(labels[id(r)]), *(_fmt(r.get(m), m) for m, _ in cols), style="dim")
            tables.append(table)
    return tables


def print_sweep_table(console: Console, rows: Sequence[Mapping[str, Any]], sort_by: str, *, title: str) -> None:
    """The sweep table at the console's width (never narrower than 80 columns)."""
    for table in sweep_tables(rows, sort_by, width=max(console.width, 80), title=title):
        console.print(table)


def csv_text(runs: Sequence[Mapping[str, Any]]) -> str:
    """``runs.csv``: one row per run (``{"run_id", "run_name", "status", "params", "metrics", "baseline"}``):
    its id, name, status, baseline kind, the params that differ between the runs (plus ``CSV_PARAMS``) and
    the headline metrics (``headline/*`` and ``CSV_METRICS``). Ready for ``pandas.read_csv``."""
    values: dict[str, set[str]] = {}
    for r in runs:
        for k, v in (r.get("params") or {}).items():
            values.setdefault(k, set()).add(str(v))
    params = [k for k in CSV_PARAMS if k in values]
    params += sorted(k for k, vals in values.items() if len(vals) > 1 and k not in params)
    present = {k for r in runs for k in (r.get("metrics") or {})}
    metrics = [m for m in CSV_METRICS if m in present]
    metrics += sorted(k for k in present if k.startswith("headline/") and k not in metrics)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["run_id", "run_name", "status", "baseline", *params, *metrics])
    for r in runs:
        p, m = r.get("params") or {}, r.get("metrics") or {}
        writer.writerow([r.get("run_id", ""), r.get("run_name", ""), r.get("status", ""), r.get("baseline", ""),
                         *(p.get(k, "") for k in params), *(m.get(k, "") for k in metrics)])
    return out.getvalue()


def mlflow_rows(runs: Sequence[Any]) -> list[dict[str, Any]]:
    """``csv_text``'s input from MLflow runs."""
    return [{"run_id": r.info.run_id, "run_name": r.info.run_name, "status": r.info.status,
             "baseline": baseline_kind(r.data.tags), "params": dict(r.data.params),
             "metrics": dict(r.data.metrics)} for r in runs]
