"""``report.html``: a comparison as one self-contained file (inline CSS, JS and SVG; no network, no server).

The sweep table per dataset (sortable; baselines apart; the varying params as columns), the records with
their CIs and verdicts, one chart panel per dataset and metric that varies, the @k curves, the failure
taxonomy, and a per-question drill-down rendered by the page's script from JSON embedded once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from ragbench import stats
from ragbench.compare.comparison import ALL, BASELINE, Comparison, Record
from ragbench.compare.html_assets import CSS, JS
from ragbench.compare.html_data import curves, drilldown, table_rows
from ragbench.compare.taxonomy import CATEGORIES, Taxonomy

PANEL_W = 460  # px: three panels a row at 1,600 px
COLORS = ("#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#1b7c83", "#e16f24", "#6e7781", "#bc4c00",
          "#116329", "#a475f9", "#4d2d00")
CAT_COLORS = ("#cf222e", "#e16f24", "#bf8700", "#8250df", "#1a7f37", "#57606a", "#d0d7de")
_VERDICT_CLASS = {stats.BETTER: "better", stats.WORSE: "worse", stats.SAME: "same", stats.NEGLIGIBLE: "same",
                  BASELINE: "baseline"}


def _n(x: float | None, digits: int = 4) -> str:
    if x is None or x != x:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.{digits}g}"


def _td(text: str, value: Any = None, cls: str = "") -> str:
    v = text if value is None else value
    attrs = f' data-v="{escape(str(v))}"' + (f' class="{cls}"' if cls else "")
    return f"<td{attrs}>{escape(text)}</td>"


def sweep_table(data: Mapping[str, Any]) -> str:
    """One sortable table per dataset: configurations (best first on the first metric), then its baselines."""
    parts = []
    for ds, rows in data["datasets"].items():
        head = "".join(f"<th>{escape(h)}</th>" for h in ("run", *data["params"]))
        head += "".join(f'<th class="n">{escape(label)}</th>' for _, label in data["metrics"])
        first = data["metrics"][0][0] if data["metrics"] else None

        def key(r: Mapping[str, Any], first: str | None = first) -> float:
            v = r["values"].get(first) if first else None
            return -v if isinstance(v, int | float) else float("inf")

        def row(r: Mapping[str, Any]) -> str:
            label = r["label"] + (f" (baseline: {r['baseline']})" if r["baseline"] else "")
            cells = _td(label, cls="run") + "".join(_td(r["params"].get(p, "")) for p in data["params"])
            cells += "".join(_td(_n(r["values"].get(m)), "" if r["values"].get(m) is None else r["values"][m], "n")
                             for m, _ in data["metrics"])
            return f'<tr data-run="{escape(r["run"])}">{cells}</tr>'

        configs = sorted((r for r in rows if not r["baseline"]), key=key)
        bases = [r for r in rows if r["baseline"]]
        body = f"<tbody>{''.join(map(row, configs))}</tbody>"
        if bases:
            body += f'<tbody class="baselines">{"".join(map(row, bases))}</tbody>'
        parts.append(f'<h3>{escape(ds)}</h3><table class="sortable sweep" data-dataset="{escape(ds)}">'
                     f"<thead><tr>{head}</tr></thead>{body}</table>")
    note = ("<p class=small>Click a column to sort. Baselines (retrieval=oracle: the gold evidence as context; "
            "retrieval=none: no context) are below the line, apart from the configurations.</p>")
    return note + "".join(parts)


def records_table(comp: Comparison, labels: Mapping[str, str]) -> str:
    head = ("run", "dataset", "metric", "n", "value", "baseline", "delta",
            f"{comp.level:.0%} CI (unadjusted)", "p (Holm)", "min effect", "verdict")
    dataset = {r.run_id: r.dataset for r in comp.runs}
    rows = []
    for r in comp.records:
        if r.type != ALL:
            continue
        cells = (_td(labels.get(r.run, r.run_name)) + _td(dataset.get(r.run, "")) + _td(r.metric)
                 + _td(str(r.n), r.n, "n") + _td(_n(r.value), r.value, "n") + _td(_n(r.baseline_value), r.baseline_value, "n")
                 + _td(_n(r.delta), r.delta, "n") + _td(f"[{_n(r.ci_low)}, {_n(r.ci_high)}]", r.ci_low, "n")
                 + _td(_n(r.p_holm, 2), r.p_holm, "n") + _td(_n(r.min_effect), r.min_effect, "n")
                 + _td(r.verdict, cls=_VERDICT_CLASS.get(r.verdict, "")))
        rows.append(f"<tr>{cells}</tr>")
    th = "".join(f'<th class="{"n" if 3 <= i <= 9 else ""}">{escape(h)}</th>' for i, h in enumerate(head))
    return f'<table class="sortable records"><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _scale(lo: float, hi: float, a: float, b: float) -> Any:
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def ci_panel(metric: str, recs: Sequence[Record], labels: Mapping[str, str], ds: str) -> str:
    """One SVG panel: each run's value as a dot, its paired CI (around the baseline's value) as a bar."""
    lab_w, row_h, top = 170, 22, 34
    h = top + row_h * len(recs) + 26
    lows = [r.baseline_value + r.ci_low for r in recs] + [r.value for r in recs]
    highs = [r.baseline_value + r.ci_high for r in recs] + [r.value for r in recs]
    x = _scale(min(lows), max(highs), lab_w + 8, PANEL_W - 14)
    color = {stats.BETTER: "#1a7f37", stats.WORSE: "#cf222e", stats.SAME: "#6e7781", stats.NEGLIGIBLE: "#6e7781",
             BASELINE: "#1b1f24"}
    out = [f'<svg width="{PANEL_W}" height="{h}" viewBox="0 0 {PANEL_W} {h}" role="img">',
           f'<text x="4" y="16" font-weight="600">{escape(ds)}: {escape(metric)}</text>',
           f'<text x="4" y="29" class="dim">{"lower" if recs[0].lower_is_better else "higher"} is better; '
           "bar: paired CI around the baseline, unadjusted</text>"]
    for i, r in enumerate(recs):
        y = top + i * row_h + row_h / 2
        name = labels.get(r.run, r.run_name)
        out.append(f'<text x="4" y="{y + 4:.0f}">{escape(name[:24])}</text>')
        lo, hi = x(r.baseline_value + r.ci_low), x(r.baseline_value + r.ci_high)
        c = color.get(r.verdict, "#0969da")
        out.append(f'<line x1="{lo:.1f}" x2="{hi:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{c}" stroke-width="2"/>')
        out.append(f'<circle cx="{x(r.value):.1f}" cy="{y:.1f}" r="4" fill="{c}"><title>{escape(name)}: '
                   f"{_n(r.value)} ({r.verdict})</title></circle>")
    lo, hi = min(lows), max(highs)
    yb = h - 8
    out.append(f'<text x="{lab_w + 8}" y="{yb}" class="dim">{_n(lo)}</text>')
    out.append(f'<text x="{PANEL_W - 14}" y="{yb}" class="dim" text-anchor="end">{_n(hi)}</text>')
    out.append("</svg>")
    return '<div class="panel">' + "".join(out) + "</div>"


def ci_panels(comp: Comparison, labels: Mapping[str, str]) -> str:
    """One panel per dataset and metric whose values differ between the runs (a flat metric has none)."""
    dataset = {r.run_id: r.dataset for r in comp.runs}
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in comp.records:
        if r.type == ALL:
            groups.setdefault((dataset.get(r.run, ""), r.metric), []).append(r)
    panels, flat = [], []
    for (ds, metric), recs in groups.items():
        if len({round(r.value, 12) for r in recs}) <= 1:
            flat.append(f"{metric} ({ds})")
            continue
        panels.append(ci_panel(metric, recs, labels, ds))
    note = f"<p class=small>Same value in every run, no panel: {escape(', '.join(flat))}.</p>" if flat else ""
    return f'<div class="panels">{"".join(panels)}</div>{note}'


def curve_panels(data: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]], labels: Mapping[str, str],
                 color: Mapping[str, str]) -> str:
    """The @k curves: k on the x axis, one line per run, one panel per dataset and measure."""
    panels = []
    w, plot_h, left, right, top = PANEL_W, 220, 44, PANEL_W - 16, 24
    for ds, by_name in data.items():
        for name, series in by_name.items():
            ks = sorted({p[0] for s in series for p in s["points"]})
            h = plot_h + 40 + 16 * len(series)  # the legend below the plot, one line per run
            x = _scale(ks[0], ks[-1], left, right)
            y = _scale(0.0, 1.0, plot_h, top)
            out = [f'<svg width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img">',
                   f'<text x="4" y="15" font-weight="600">{escape(ds)}: {escape(name)}</text>']
            for v in (0.0, 0.25, 0.5, 0.75, 1.0):
                out.append(f'<line x1="{left}" x2="{right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#d0d7de"/>'
                           f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end" class="dim">{v:g}</text>')
            for k in ks:
                out.append(f'<text x="{x(k):.1f}" y="{plot_h + 16}" text-anchor="middle" class="dim">{k}</text>')
            out.append(f'<text x="{(left + right) / 2:.0f}" y="{plot_h + 32}" text-anchor="middle">'
                       "k (cut-off rank)</text>")
            for i, s in enumerate(series):
                c = color.get(s["run"], COLORS[i % len(COLORS)])
                pts = " ".join(f"{x(k):.1f},{y(v):.1f}" for k, v in s["points"])
                dash = ' stroke-dasharray="6 3"' if i % 2 else ""  # lines that coincide stay told apart
                out.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"{dash}>'
                           f'<title>{escape(labels.get(s["run"], s["run"]))}</title></polyline>')
                ly = plot_h + 50 + 16 * i
                out.append(f'<line x1="{left}" x2="{left + 22}" y1="{ly - 4}" y2="{ly - 4}" stroke="{c}" '
                           f'stroke-width="2"{dash}/><text x="{left + 28}" y="{ly}">'
                           f'{escape(labels.get(s["run"], s["run"])[:50])}</text>')
            out.append("</svg>")
            panels.append('<div class="panel">' + "".join(out) + "</div>")
    return f'<div class="panels">{"".join(panels)}</div>' if panels else "<p class=small>No @k metrics.</p>"


def taxonomy_section(taxa: Sequence[Taxonomy], labels: Mapping[str, str]) -> str:
    """One stacked bar per run (its cases by category), and the counts per question type."""
    if not taxa:
        return "<p class=small>No taxonomy.</p>"
    w, row_h, lab_w = 900, 22, 200
    h = row_h * len(taxa) + 40
    out = [f'<svg width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img">']
    for i, t in enumerate(taxa):
        counts = t.counts[ALL]
        total = sum(counts.values()) or 1
        y, x0 = 6 + i * row_h, float(lab_w)
        out.append(f'<text x="4" y="{y + 14}">{escape(labels.get(t.run, t.run_name)[:28])}</text>')
        for cat, c in zip(CATEGORIES, CAT_COLORS, strict=True):
            width = counts.get(cat, 0) / total * (w - lab_w - 10)
            if width:
                out.append(f'<rect x="{x0:.1f}" y="{y}" width="{width:.1f}" height="{row_h - 6}" fill="{c}">'
                           f"<title>{cat}: {counts.get(cat, 0)}</title></rect>")
            x0 += width
    x0 = 4.0
    for cat, c in zip(CATEGORIES, CAT_COLORS, strict=True):
        out.append(f'<rect x="{x0}" y="{h - 16}" width="10" height="10" fill="{c}"/>'
                   f'<text x="{x0 + 14}" y="{h - 7}">{cat.replace("_", " ")}</text>')
        x0 += 14 + 7.2 * len(cat) + 14
    out.append("</svg>")
    th = "".join(f'<th class="n">{c.replace("_", " ")}</th>' for c in CATEGORIES)
    rows = "".join(f"<tr>{_td(labels.get(t.run, t.run_name))}{_td(qtype)}"
                   + "".join(_td(str(counts.get(c, 0)), counts.get(c, 0), "n") for c in CATEGORIES) + "</tr>"
                   for t in taxa for qtype, counts in t.counts.items())
    return ("".join(out) + f'<table class="sortable"><thead><tr><th>run</th><th>type</th>{th}</tr></thead>'
            f"<tbody>{rows}</tbody></table>")


def _json_for_script(doc: Any) -> str:
    """JSON safe inside a <script> element (no ``</script>`` or ``<!--`` can end it early)."""
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def build_html(comp: Comparison, taxa: Sequence[Taxonomy], labels: Mapping[str, str], *,
               records: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
               tags: Mapping[str, Mapping[str, str]] | None = None, title: str = "ragbench comparison") -> str:
    """The whole report as one HTML document (``records``: run id -> its cases.jsonl rows, for the drill-down)."""
    color = {r.run_id: COLORS[i % len(COLORS)] for i, r in enumerate(comp.runs)}
    data = {"labels": {r.run_id: labels.get(r.run_id, r.name) for r in comp.runs},
            "drill": drilldown(comp, taxa, records or {})}
    notes = "".join(f"<li>{escape(n)}</li>" for n in (*comp.notes, comp.correction, comp.practical) if n)
    has_records = any(records.get(r.run_id) for r in comp.runs) if records else False
    dd_note = ("" if has_records else "<p class=small>The runs' cases.jsonl records were not read: questions show "
               "their scores only.</p>")
    body = f"""<h1>{escape(title)}</h1>
<nav><a href="#table">sweep table</a><a href="#comparison">comparison</a><a href="#charts">charts</a>
<a href="#curves">@k curves</a><a href="#taxonomy">failure taxonomy</a><a href="#questions">questions</a></nav>
<ul class="notes">{notes}</ul>
<h2 id="table">Sweep table</h2>{sweep_table(table_rows(comp, labels, tags or {}))}
<h2 id="comparison">Against the baseline (all question types)</h2>
<p class=small>Each run against its dataset's baseline over the questions they share: paired delta, {comp.level:.0%}
bootstrap CI, Holm-adjusted p; verdict better / worse only when significant and at least the metric's practical
threshold (column "min effect"); a smaller significant difference is "{stats.NEGLIGIBLE}".
The verdict reads the Holm-adjusted p, which accounts for the many comparisons; the CI is each
comparison's own, <b>not adjusted</b>, so a CI that excludes 0 may sit beside "{stats.SAME}".</p>
{records_table(comp, labels)}
<h2 id="charts">Charts</h2>{ci_panels(comp, labels)}
<h2 id="curves">@k curves</h2>{curve_panels(curves(comp.runs), labels, color)}
<h2 id="taxonomy">Failure taxonomy</h2>
<p class=small>Where each case's gold evidence was lost: not retrieved, ranked below top-k, dropped by expansion, or
in the context but answered wrong.</p>{taxonomy_section(taxa, labels)}
<h2 id="questions">Questions</h2>
<p class=small>Click a question for its gold answer and evidence, each run's hits (★ gold), the context the
generator read, the answer and every judge's reasoning. ■ green: right (judge accuracy, else F1 &ge; 0.5).</p>
{dd_note}<div id="drilldown"></div>"""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style></head>'
            f'<body>{body}<script type="application/json" id="report-data">{_json_for_script(data)}</script>'
            f"<script>{JS}</script></body></html>\n")


def write_html(path: Path, comp: Comparison, taxa: Sequence[Taxonomy], labels: Mapping[str, str], **kwargs: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(build_html(comp, taxa, labels, **kwargs), encoding="utf-8")
    return path
