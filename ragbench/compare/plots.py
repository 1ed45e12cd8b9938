"""PNG plots of a comparison (matplotlib, Agg backend, imported only when a report is written)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragbench.compare import stats
from ragbench.compare.comparison import ALL, Comparison, Record
from ragbench.compare.taxonomy import CATEGORIES, Taxonomy
from ragbench.gc_tuning import long_lived

log = logging.getLogger(__name__)
COST_METRICS = ("context/tokens", "latency/", "tokens/", "cost/")


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (its import is ~0.7 s: ``prepare`` may do it ahead)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def prepare() -> None:
    """Imports what the plots draw with, ahead of them (while the sweep's last case files are written)."""
    with long_lived():  # matplotlib's modules stay for the process
        _pyplot()


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point dominates (lower or equal cost and higher or equal quality,
    one of them strictly), ordered by cost."""
    front = []
    for i, (c, q) in enumerate(points):
        dominated = any((c2 <= c and q2 >= q) and (c2 < c or q2 > q) for j, (c2, q2) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: points[i])


def _overall(comp: Comparison) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {}
    for r in comp.records:
        if r.type == ALL:
            out.setdefault(r.metric, []).append(r)
    return out


def metric_ci(path: Path, comp: Comparison, labels: Mapping[str, str]) -> Path:
    """One panel per metric: each run's value, the bar its paired CI around the baseline's value."""
    plt = _pyplot()
    by_metric = _overall(comp)
    # one row per run in every panel, so the run labels are drawn once, on the left (sharey)
    runs = list(dict.fromkeys(r.run for recs in by_metric.values() for r in recs))
    names = {r.run: r.run_name for recs in by_metric.values() for r in recs}
    row = {run: i for i, run in enumerate(runs)}
    fig, axes = plt.subplots(1, len(by_metric), figsize=(3.4 * len(by_metric) + 2.6, 0.5 * len(runs) + 1.8),
                             squeeze=False, sharey=True)
    colors = {stats.BETTER: "tab:green", stats.WORSE: "tab:red", stats.SAME: "tab:gray", "baseline": "black"}
    for ax, (metric, recs) in zip(axes[0], by_metric.items(), strict=True):
        for r in recs:
            low, high = r.baseline_value + r.ci_low, r.baseline_value + r.ci_high
            ax.errorbar(r.value, row[r.run], xerr=[[r.value - low], [high - r.value]], fmt="o", capsize=3,
                        color=colors.get(r.verdict, "tab:blue"))
        ax.set_title(f"{metric} ({'lower' if recs[0].lower_is_better else 'higher'} is better)", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(range(len(runs)), [labels.get(run, names[run]) for run in runs], fontsize=7)
    axes[0][0].set_ylim(len(runs) - 0.5, -0.5)  # the first run on top (shared by every panel)
    fig.suptitle(f"value per run, {comp.level:.0%} paired CI around the baseline (green better, red worse)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def pareto(path: Path, comp: Comparison, labels: Mapping[str, str]) -> Path | None:
    """Quality (the first higher-is-better metric) against each cost metric, Pareto front marked."""
    by_metric = _overall(comp)
    quality = next((m for m, recs in by_metric.items() if not recs[0].lower_is_better), None)
    costs = [m for m in by_metric if m.startswith(COST_METRICS) and m != quality]
    if quality is None or not costs:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(costs), figsize=(5 * len(costs), 4), squeeze=False)
    q_of = {r.run: r.value for r in by_metric[quality]}
    dataset = {r.run_id: r.dataset for r in comp.runs}
    for ax, cost in zip(axes[0], costs, strict=True):
        for ds in sorted({dataset[r.run] for r in by_metric[cost]}):
            recs = [r for r in by_metric[cost] if r.run in q_of and dataset[r.run] == ds]
            pts = [(r.value, q_of[r.run]) for r in recs]
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=ds, zorder=3)
            front = pareto_front(pts)
            ax.plot([pts[i][0] for i in front], [pts[i][1] for i in front], "--", color="tab:red", zorder=2,
                    label=f"Pareto front ({ds})")
            for r, (x, yv) in zip(recs, pts, strict=True):
                ax.annotate(labels.get(r.run, r.run_name), (x, yv), fontsize=6, xytext=(3, 3),
                            textcoords="offset points")
        ax.set_xlabel(f"{cost} (lower is better)")
        ax.set_ylabel(quality)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def heatmap(path: Path, comp: Comparison, labels: Mapping[str, str]) -> Path | None:
    """Runs x question types, one panel per metric: the delta, coloured by improvement."""
    recs = [r for r in comp.records if r.type != ALL]
    if not recs:
        return None
    plt = _pyplot()
    metrics = list(dict.fromkeys(r.metric for r in recs))
    runs = [r.run_id for r in comp.runs]
    types = sorted({r.type for r in recs})
    fig, axes = plt.subplots(1, len(metrics), figsize=(1.1 * len(types) * len(metrics) + 2.5,
                                                       0.45 * len(runs) + 2.2), squeeze=False, sharey=True)
    for ax, metric in zip(axes[0], metrics, strict=True):
        grid = np.full((len(runs), len(types)), np.nan)
        text = [["" for _ in types] for _ in runs]
        for r in recs:
            if r.metric == metric:
                i, j = runs.index(r.run), types.index(r.type)
                grid[i, j] = -r.delta if r.lower_is_better else r.delta
                mark = {stats.BETTER: "▲", stats.WORSE: "▼"}.get(r.verdict, "")
                text[i][j] = f"{r.delta:+.3g}{mark}"
        scale = np.nanmax(np.abs(grid)) if np.isfinite(grid).any() else 1.0
        ax.imshow(grid, cmap="RdYlGn", vmin=-(scale or 1.0), vmax=scale or 1.0, aspect="auto")
        for i in range(len(runs)):
            for j in range(len(types)):
                ax.text(j, i, text[i][j], ha="center", va="center", fontsize=6)
        ax.set_xticks(range(len(types)), types, rotation=45, ha="right", fontsize=7)
        ax.set_title(metric, fontsize=9)
    axes[0][0].set_yticks(range(len(runs)), [labels.get(r, r[:8]) for r in runs], fontsize=7)  # shared: once
    fig.suptitle("delta to the baseline per question type (green = better; ▲▼ significant after Holm)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def taxonomy_bars(path: Path, taxa: Sequence[Taxonomy], labels: Mapping[str, str]) -> Path | None:
    """One stacked bar per run: its cases by failure category."""
    if not taxa:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(taxa) + 1.8))
    left = np.zeros(len(taxa))
    for cat in CATEGORIES:
        width = np.array([t.counts[ALL].get(cat, 0) for t in taxa], dtype=float)
        ax.barh(range(len(taxa)), width, left=left, label=cat.replace("_", " "))
        left += width
    ax.set_yticks(range(len(taxa)), [labels.get(t.run, t.run_name) for t in taxa], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("cases")
    ax.legend(fontsize=6, ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_plots(folder: Path, comp: Comparison, taxa: Sequence[Taxonomy], labels: Mapping[str, str]) -> list[Path]:
    """Every plot that has data, as PNG files in ``folder``. Each is 0.3-0.6 s of one core: the last two
    are drawn by a forked child while the process draws the first two (``ragbench.tracking.background``);
    whatever goes wrong in the child, the process draws its two as well, over anything it left."""
    from ragbench.tracking.background import Child, can_fork

    draw: list[Callable[[], Path | None]] = [
        lambda: metric_ci(folder / "metrics_ci.png", comp, labels),
        lambda: pareto(folder / "pareto.png", comp, labels),
        lambda: heatmap(folder / "by_type_heatmap.png", comp, labels),
        lambda: taxonomy_bars(folder / "taxonomy.png", taxa, labels)]
    here, there = draw[:2], draw[2:]

    def in_child() -> bytes:
        return "\n".join("" if (p := plot()) is None else p.name for plot in there).encode()

    child = None
    if can_fork():
        try:
            child = Child(in_child)
        except OSError:  # no process slot: all four here
            pass
    out = [plot() for plot in here]
    drawn = child.result() if child is not None else None
    if drawn is None:
        if child is not None:
            log.warning("the plots' child failed (%s); drawing them in this process", child.problem)
        out += [plot() for plot in there]
    else:
        out += [folder / name if name else None for name in drawn.decode().split("\n")]
    return [p for p in out if p is not None]
