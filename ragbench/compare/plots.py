"""PNG plots of a comparison (matplotlib, Agg backend, imported only when a report is written)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragbench import stats
from ragbench.compare.comparison import ALL, Comparison, Record
from ragbench.compare.taxonomy import CATEGORIES, Taxonomy

log = logging.getLogger(__name__)
COST_METRICS = ("context/tokens", "latency/", "tokens/", "cost/")


def _figure(width: float, height: float) -> Any:
    """A matplotlib figure of ``width`` x ``height`` inches drawn by the Agg canvas, without pyplot: a report
    draws into files only, so it needs no figure registry and leaves the process's backend as it was (the
    same PNG bytes as through pyplot on Agg; matplotlib's import is ~0.37 s either way)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point dominates (lower or equal cost and higher or equal quality,
    one of them strictly), ordered by cost."""
    front = []
    for i, (c, q) in enumerate(points):
        dominated = any((c2 <= c and q2 >= q) and (c2 < c or q2 > q) for j, (c2, q2) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: points[i])


DPI = 100  # a figure inch is 100 px: the widths below keep every PNG <= MAX_WIDTH_PX
MAX_WIDTH_PX = 1600
FONT = 10  # points: 13.9 px at DPI, >= 10 px even when a viewer shows the image at 72% of its size
COLS = 3  # panels a row


def _overall(comp: Comparison) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {}
    for r in comp.records:
        if r.type == ALL:
            out.setdefault(r.metric, []).append(r)
    return out


def _by_dataset(comp: Comparison, records: Sequence[Record]) -> dict[str, list[Record]]:
    dataset = {r.run_id: r.dataset for r in comp.runs}
    out: dict[str, list[Record]] = {}
    for r in records:
        out.setdefault(dataset.get(r.run, ""), []).append(r)
    return dict(sorted(out.items()))


def varies(recs: Sequence[Record]) -> bool:
    """Whether the runs' values differ (a flat metric gets no panel: a chart of equal values shows nothing)."""
    return len({round(r.value, 12) for r in recs}) > 1


def _grid(n: int, panel_w: float, panel_h: float) -> tuple[Any, list[Any]]:
    """``n`` panels, COLS a row, the figure at most MAX_WIDTH_PX wide."""
    cols = min(COLS, n)
    rows = -(-n // cols)
    width = min(panel_w * cols, MAX_WIDTH_PX / DPI)
    fig = _figure(width, panel_h * rows)
    axes = fig.subplots(rows, cols, squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path


def metric_ci(path: Path, comp: Comparison, labels: Mapping[str, str]) -> Path | None:
    """One panel per dataset and metric that varies: each run's value, the bar its paired CI around the
    baseline's value (runs of different datasets never share an axis)."""
    panels = [(ds, metric, recs) for metric, all_recs in _overall(comp).items()
              for ds, recs in _by_dataset(comp, all_recs).items() if varies(recs)]
    if not panels:
        return None
    rows = max(len(recs) for _, _, recs in panels)
    fig, axes = _grid(len(panels), 5.3, 0.42 * rows + 1.4)
    colors = {stats.BETTER: "tab:green", stats.WORSE: "tab:red", stats.SAME: "tab:gray", stats.NEGLIGIBLE: "tab:gray",
              "baseline": "black"}
    for ax, (ds, metric, recs) in zip(axes, panels, strict=True):
        for i, r in enumerate(recs):
            low, high = r.baseline_value + r.ci_low, r.baseline_value + r.ci_high
            ax.errorbar(r.value, i, xerr=[[max(r.value - low, 0)], [max(high - r.value, 0)]], fmt="o", capsize=3,
                        color=colors.get(r.verdict, "tab:blue"))
        ax.set_yticks(range(len(recs)), [labels.get(r.run, r.run_name)[:26] for r in recs], fontsize=FONT)
        ax.set_ylim(len(recs) - 0.5, -0.5)
        ax.tick_params(axis="x", labelsize=FONT)
        ax.set_title(f"{ds}: {metric}\n({'lower' if recs[0].lower_is_better else 'higher'} is better)", fontsize=FONT)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(f"value per run; bar: {comp.level:.0%} paired CI around the baseline (green better, red worse)",
                 fontsize=FONT)
    return _save(fig, path)


def pareto(path: Path, comp: Comparison, labels: Mapping[str, str]) -> Path | None:
    """Quality (the first higher-is-better metric) against each cost metric, one panel per dataset and cost,
    the Pareto front marked."""
    by_metric = _overall(comp)
    quality = next((m for m, recs in by_metric.items() if not recs[0].lower_is_better), None)
    costs = [m for m in by_metric if m.startswith(COST_METRICS) and m != quality and varies(by_metric[m])]
    if quality is None or not costs:
        return None
    q_of = {r.run: r.value for r in by_metric[quality]}
    panels = [(ds, cost, [r for r in recs if r.run in q_of]) for cost in costs
              for ds, recs in _by_dataset(comp, by_metric[cost]).items()]
    fig, axes = _grid(len(panels), 5.3, 4.2)
    for ax, (ds, cost, recs) in zip(axes, panels, strict=True):
        pts = [(r.value, q_of[r.run]) for r in recs]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], color="tab:blue", zorder=3)
        front = pareto_front(pts)
        ax.plot([pts[i][0] for i in front], [pts[i][1] for i in front], "--", color="tab:red", zorder=2,
                label="Pareto front")
        for n, (r, (x, yv)) in enumerate(zip(recs, pts, strict=True)):
            ax.annotate(labels.get(r.run, r.run_name)[:20], (x, yv), fontsize=FONT, xytext=(4, 4 + 11 * (n % 3)),
                        textcoords="offset points")
        ax.set_title(ds, fontsize=FONT)
        ax.set_xlabel(f"{cost} (lower is better)", fontsize=FONT)
        ax.set_ylabel(quality, fontsize=FONT)
        ax.tick_params(labelsize=FONT)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=FONT)
    return _save(fig, path)


def heatmap(path: Path, comp: Comparison, labels: Mapping[str, str]) -> Path | None:
    """Runs x question types, one panel per dataset and metric that varies: the delta, coloured by improvement."""
    recs = [r for r in comp.records if r.type != ALL]
    if not recs:
        return None
    overall = _overall(comp)
    panels = [(ds, metric, [r for r in recs if r.metric == metric and r.run in {x.run for x in ds_recs}])
              for metric in dict.fromkeys(r.metric for r in recs)
              for ds, ds_recs in _by_dataset(comp, overall.get(metric, [])).items() if varies(ds_recs)]
    panels = [p for p in panels if p[2]]
    if not panels:
        return None
    width_types = max(len({r.type for r in p[2]}) for p in panels)
    height_runs = max(len({r.run for r in p[2]}) for p in panels)
    fig, axes = _grid(len(panels), 2.4 + 0.85 * width_types, 0.45 * height_runs + 2.4)
    for ax, (ds, metric, cells) in zip(axes, panels, strict=True):
        runs = list(dict.fromkeys(r.run for r in cells))
        types = sorted({r.type for r in cells})
        grid = np.full((len(runs), len(types)), np.nan)
        for r in cells:
            i, j = runs.index(r.run), types.index(r.type)
            grid[i, j] = -r.delta if r.lower_is_better else r.delta
            mark = {stats.BETTER: "▲", stats.WORSE: "▼"}.get(r.verdict, "")
            cell = f"{r.delta:+.0f}" if abs(r.delta) >= 100 else f"{r.delta:+.2g}"
            ax.text(j, i, cell + mark, ha="center", va="center", fontsize=FONT)
        scale = np.nanmax(np.abs(grid)) if np.isfinite(grid).any() else 1.0
        ax.imshow(grid, cmap="RdYlGn", vmin=-(scale or 1.0), vmax=scale or 1.0, aspect="auto")
        ax.set_xticks(range(len(types)), types, rotation=30, ha="right", fontsize=FONT)
        ax.set_yticks(range(len(runs)), [labels.get(r, r[:8])[:26] for r in runs], fontsize=FONT)
        ax.set_title(f"{ds}: {metric}", fontsize=FONT)
    fig.suptitle("delta to the baseline per question type (green = better; ▲▼ significant after Holm and at "
                 "least the practical threshold)", fontsize=FONT)
    return _save(fig, path)


def taxonomy_bars(path: Path, taxa: Sequence[Taxonomy], labels: Mapping[str, str]) -> Path | None:
    """One stacked bar per run: its cases by failure category."""
    if not taxa:
        return None
    fig = _figure(10, 0.45 * len(taxa) + 2.2)
    ax = fig.subplots()
    left = np.zeros(len(taxa))
    for cat in CATEGORIES:
        width = np.array([t.counts[ALL].get(cat, 0) for t in taxa], dtype=float)
        ax.barh(range(len(taxa)), width, left=left, label=cat.replace("_", " "))
        left += width
    ax.set_yticks(range(len(taxa)), [labels.get(t.run, t.run_name)[:26] for t in taxa], fontsize=FONT)
    ax.invert_yaxis()
    ax.set_xlabel("cases", fontsize=FONT)
    ax.tick_params(axis="x", labelsize=FONT)
    ax.legend(fontsize=FONT, ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    return _save(fig, path)


def write_plots(folder: Path, comp: Comparison, taxa: Sequence[Taxonomy], labels: Mapping[str, str]) -> list[Path]:
    """Every plot that has data, as PNG files in ``folder``."""
    drawn = [metric_ci(folder / "metrics_ci.png", comp, labels), pareto(folder / "pareto.png", comp, labels),
             heatmap(folder / "by_type_heatmap.png", comp, labels), taxonomy_bars(folder / "taxonomy.png", taxa, labels)]
    return [p for p in drawn if p is not None]
