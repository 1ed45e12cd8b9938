"""A sweep's runs as rows: the terminal table that fits 80 columns (configurations ranked, baselines apart,
the rest of the metrics in a second table) and ``runs.csv`` (one row per run: params and headline metrics)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ragbench.metric_keys import find, sweep_columns, sweep_ranks
from ragbench.tracking.run_names import short_items, split_overrides, swept_keys

if TYPE_CHECKING:
    from ragbench.tracking.run_records import RecordedRun

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


def tied(a: Any, b: Any) -> bool:
    """Whether two values of the ranking metric tie (equal but for float rounding); a missing value ties
    none."""
    return (isinstance(a, int | float) and isinstance(b, int | float)
            and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12))


def rank_labels(values: Sequence[Any]) -> list[str]:
    """The rank of each value, best first as given: tied values share the best rank of their run, marked
    ``=`` (``1, =2, =2, 4``), so equal configurations are never shown as ranked apart."""
    out: list[str] = []
    for i, v in enumerate(values):
        first = i
        while first > 0 and tied(values[first - 1], v):
            first -= 1
        shared = first < i or (i + 1 < len(values) and tied(values[i + 1], v))
        out.append(f"={first + 1}" if shared else str(i + 1))
    return out


def sweep_tables(rows: Sequence[Mapping[str, Any]], sort_by: str, *, width: int,
                 title: str) -> list[RenderableType]:
    """Per dataset: its configurations ranked on ``sort_by`` (rows already ranked; ties marked ``=2``), its
    baselines (``retrieval=oracle|none``) below a line and unranked; metrics that differ between jobs and do
    not fit ``width`` in a second table, those every job has the same value of in one line."""
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
    same = [(m, label) for m, label in rest if len({r.get(m) for r in rows}) == 1]
    rest = [c for c in rest if c not in same]
    tables: list[RenderableType] = []
    any_tie = False
    for part, cols in (("", fit), (", more metrics", rest)):
        if not cols:
            continue
        for ds in datasets:
            group = [r for r in rows if str(r.get("dataset", "")) == ds]
            configs = [r for r in group if not r.get("baseline")]
            bases = [r for r in group if r.get("baseline")]
            ranks = rank_labels([r.get(sort_by) for r in configs])
            any_tie = any_tie or any(x.startswith("=") for x in ranks)
            head = f"{ds or 'runs'}{part}: {len(configs)} configurations, best {sort_by} first"
            if len(configs) > 1 and all(x.startswith("=") for x in ranks):
                head = f"{ds or 'runs'}{part}: {len(configs)} configurations, all tied on {sort_by}"
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
                table.add_row(ranks[i - 1], escape(labels[id(r)]), *(_fmt(r.get(m), m) for m, _ in cols),
                              end_section=bool(bases) and i == len(configs))
            for r in bases:  # below the line, unranked: a bound on the configurations, not one of them
                table.add_row("-", escape(labels[id(r)]), *(_fmt(r.get(m), m) for m, _ in cols), style="dim")
            tables.append(table)
    if same:  # a column of one value is no comparison: said once, not a table of equal columns
        said = ", ".join(f"{label} {_fmt(rows[0].get(m), m)}" for m, label in same)
        tables.append(Text(f"the same in every job: {said}", overflow="fold"))
    if any_tie:
        tables.append(Text(f"=n: tied on {sort_by}, listed in job order", overflow="fold"))
    return tables


def print_sweep_table(console: Console, rows: Sequence[Mapping[str, Any]], sort_by: str, *, title: str) -> None:
    """The sweep table at the console's width (never narrower than 80 columns)."""
    for table in sweep_tables(rows, sort_by, width=max(console.width, 80), title=title):
        console.print(table)


def _preference(key: str, swept: Sequence[str]) -> tuple[int, int, int, str]:
    """How well a param names its swept axis (lower first): the swept key itself, then ``<group>.name``, then
    a ``_target_`` under the group (the class a group option picks), then any other key under it."""
    rank = next((i for i, s in enumerate(swept) if key == s or key.startswith(f"{s}.")), len(swept))
    kind = 0 if key in swept else 1 if key.endswith(".name") else 2 if key.endswith("._target_") else 3
    return rank, kind, key.count("."), key


def axis_params(params: Sequence[Mapping[str, Any]], swept: Sequence[str] = ()) -> list[str]:
    """The params that tell ``params`` (one mapping per run) apart, one per axis of the sweep: a param that
    splits the runs exactly as an earlier one does is the same axis seen twice (``dataset=locomo,qasper``
    changes ``dataset.name``, ``dataset._target_`` and ``judge.judges.lexical.dataset``) and is left out.
    ``swept``: the keys the sweep's command line varies (``retrieval.topk``, a group such as ``dataset``);
    when given, only their params are kept -- the swept key itself, else the best of its group
    (``_preference``) -- and others only when a swept key has none (``experiment=a,b``). Swept keys first, in
    command-line order."""
    keys = list(dict.fromkeys(k for p in params for k in p))
    splits: dict[str, tuple[int, ...]] = {}
    for k in keys:
        seen: dict[str, int] = {}
        splits[k] = tuple(seen.setdefault(str(p.get(k, "")), len(seen)) for p in params)
    differing = sorted((k for k in keys if max(splits[k], default=0) > 0),
                       key=lambda k: _preference(k, swept))
    kept: list[str] = []
    for key in swept:  # per swept key, its param that splits the runs the most
        mine = [k for k in differing if k == key or k.startswith(f"{key}.")]
        if mine:
            best = min(mine, key=lambda k: (-max(splits[k]), _preference(k, swept)))
            if best not in kept and splits[best] not in {splits[k] for k in kept}:
                kept.append(best)
    if swept and len(kept) == len(swept):
        return kept
    for k in differing:  # no swept keys known (or one without a param): every axis once
        if splits[k] not in {splits[x] for x in kept}:
            kept.append(k)
    return kept


def _csv_value(value: Any, key: str) -> Any:
    """A metric's CSV cell: a count (by its declaration) as an integer (``233``, never ``233.0``)."""
    info = find(key)
    if isinstance(value, float) and value.is_integer() and info is not None and info.unit == "count":
        return int(value)
    return value


def csv_text(runs: Sequence[Mapping[str, Any]], swept: Sequence[str] = ()) -> str:
    """``runs.csv``: one row per run (``{"run_id", "run_name", "status", "params", "metrics", "baseline"}``):
    its id, name, status, baseline kind, ``CSV_PARAMS`` and the params of the sweep's axes (``axis_params``,
    ``swept``: the keys its command line varies), then the headline metrics (``headline/*`` and
    ``CSV_METRICS``; counts as integers). Ready for ``pandas.read_csv``."""
    values: dict[str, set[str]] = {}
    for r in runs:
        for k, v in (r.get("params") or {}).items():
            values.setdefault(k, set()).add(str(v))
    params = [k for k in CSV_PARAMS if k in values]
    params += [k for k in axis_params([r.get("params") or {} for r in runs], swept) if k not in params]
    present = {k for r in runs for k in (r.get("metrics") or {})}
    metrics = [m for m in CSV_METRICS if m in present]
    metrics += sorted(k for k in present if k.startswith("headline/") and k not in metrics)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["run_id", "run_name", "status", "baseline", *params, *metrics])
    for r in runs:
        p, m = r.get("params") or {}, r.get("metrics") or {}
        writer.writerow([r.get("run_id", ""), r.get("run_name", ""), r.get("status", ""), r.get("baseline", ""),
                         *(p.get(k, "") for k in params), *(_csv_value(m.get(k, ""), k) for k in metrics)])
    return out.getvalue()


def sweep_keys_of(client: Any, runs: Sequence[Any]) -> list[str]:
    """The keys the command line of the runs' one sweep varied (its parent run's
    ``ragbench.sweep_overrides``); [] when the runs come from several sweeps or none, or the parent cannot be
    read."""
    parents = {r.data.tags.get("mlflow.parentRunId") for r in runs}
    if len(parents) != 1 or None in parents:
        return []
    try:
        overrides = client.get_run(parents.pop()).data.tags.get("ragbench.sweep_overrides") or ""
    except Exception:  # noqa: BLE001 - a column choice is never worth failing the command
        return []
    return swept_keys(split_overrides(overrides, " "))


def record_rows(runs: Sequence[RecordedRun]) -> list[dict[str, Any]]:
    """``csv_text``'s input from runs read with their records (``ragbench.tracking.run_records``): each
    record's config and params, metrics and baseline kind; MLflow's run id and name."""
    return [{"run_id": r.run_id, "run_name": r.run_name, "status": r.status,
             "baseline": baseline_kind(r.tags), "params": dict(r.params), "metrics": dict(r.metrics)} for r in runs]
