"""A comparison as a rich terminal table, a JSON file and a Markdown report with plots."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragbench import stats
from ragbench.compare.comparison import ALL, BASELINE, Comparison, Record
from ragbench.compare.html import write_html
from ragbench.compare.plots import write_plots
from ragbench.compare.taxonomy import CATEGORIES, Taxonomy
from ragbench.compare.terminal import print_comparison
from ragbench.tracking.report import console
from ragbench.tracking.run_names import job_labels

_MARK = {stats.BETTER: "▲", stats.WORSE: "▼", BASELINE: "=", stats.SAME: "·", stats.NEGLIGIBLE: "~"}
LEGEND = "▲ better, ▼ worse, ~ no practical difference (significant, below the threshold), · no detectable " \
         "difference, = baseline"


def labels(comp: Comparison) -> dict[str, str]:
    """Short run labels: the job number plus only the overrides that differ between the runs."""
    named = {r.run_id: r.name for r in comp.runs}
    out = job_labels(named) if all(named.values()) else {}
    return {rid: out.get(rid) or name or rid[:8] for rid, name in named.items()}


def _num(x: float) -> str:
    if x != x:  # NaN
        return "-"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def _delta(x: float) -> str:
    return "0" if x == 0 else f"{x:+,.0f}" if abs(x) >= 1000 else f"{x:+.4g}"


def _p(x: float) -> str:
    return "1" if x >= 1 else f"{x:.2g}" if x >= 1e-4 else "<1e-4"


def overall_rows(comp: Comparison) -> list[list[str]]:
    lab = labels(comp)
    return [[lab[r.run], r.metric, str(r.n), _num(r.value), _num(r.baseline_value), _delta(r.delta),
             f"[{_delta(r.ci_low)}, {_delta(r.ci_high)}]", _p(r.p_value), _p(r.p_holm), r.verdict]
            for r in comp.records if r.type == ALL]


OVERALL_HEAD = ("run", "metric", "n", "value", "baseline", "delta", "95% CI (unadjusted)", "p", "p (Holm)",
                "verdict")


def type_rows(comp: Comparison) -> tuple[list[str], list[list[str]]]:
    """(header, rows): one row per (run, type), one delta-and-mark cell per metric."""
    lab = labels(comp)
    metrics = list(dict.fromkeys(r.metric for r in comp.records))
    cells: dict[tuple[str, str], dict[str, Record]] = {}
    for r in comp.records:
        if r.type != ALL and r.verdict != BASELINE:
            cells.setdefault((r.run, r.type), {})[r.metric] = r
    rows = [[lab[run], qtype, *(f"{_delta(c[m].delta)} {_MARK[c[m].verdict]} (n={c[m].n})" if m in c else "-"
                                for m in metrics)]
            for (run, qtype), c in cells.items()]
    return ["run", "type", *metrics], rows


def taxonomy_rows(comp: Comparison, taxa: Sequence[Taxonomy]) -> list[list[str]]:
    lab = labels(comp)
    return [[lab.get(t.run, t.run_name), qtype, *(str(counts.get(c, 0)) for c in CATEGORIES)]
            for t in taxa for qtype, counts in t.counts.items()]


def taxonomy_notes(comp: Comparison, taxa: Sequence[Taxonomy]) -> list[str]:
    """Each distinct taxonomy note once, naming the runs it is about."""
    lab = labels(comp)
    runs: dict[str, list[str]] = {}
    for t in taxa:
        for note in t.notes:
            runs.setdefault(note, []).append(lab.get(t.run, t.run_name))
    return [f"{'all runs' if len(who) == len(taxa) > 1 else ', '.join(who)}: {note}" for note, who in runs.items()]


def print_table(comp: Comparison, taxa: Sequence[Taxonomy]) -> None:
    """The terminal view (``ragbench.compare.terminal``): notes, one table per dataset and metric, the
    deltas by question type, the failure taxonomy; every table fits 80 columns."""
    print_comparison(console, comp, taxa, taxonomy_notes(comp, taxa))


def as_json(comp: Comparison, taxa: Sequence[Taxonomy]) -> dict[str, Any]:
    """The JSON document: ``records`` (one per run, metric, type) plus how they were made."""
    return {
        "records": [r.json() for r in comp.records],
        "baseline_of": {rid: base.run_id for rid, base in comp.baseline_of.items()},
        "correction": comp.correction, "alpha": comp.alpha, "resamples": comp.resamples, "seed": comp.seed,
        "practical": comp.practical,
        "min_effects": {s.name: {"absolute": s.min_effect.absolute, "relative": s.min_effect.relative,
                                 "from": "--min-effect" if s.min_effect_given else "default"} for s in comp.metrics},
        "confidence_level": comp.level, "notes": list(comp.notes),
        "taxonomy": [row for t in taxa for row in t.json()],
        "taxonomy_notes": taxonomy_notes(comp, taxa),
    }


def write_json(path: Path, comp: Comparison, taxa: Sequence[Taxonomy], *,
               ppi: Sequence[Mapping[str, Any]] = ()) -> None:
    """The JSON document at ``path``; ``ppi``: ``--ppi``'s estimates (``PPIResult.json``), under ``ppi``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {**as_json(comp, taxa), **({"ppi": list(ppi)} if ppi else {})}
    path.write_text(json.dumps(doc, indent=1, allow_nan=True) + "\n", encoding="utf-8")


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def esc(x: str) -> str:
        return str(x).replace("|", "\\|")
    lines = ["| " + " | ".join(map(esc, head)) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(map(esc, r)) + " |" for r in rows]
    return "\n".join(lines)


def write_report(folder: Path, comp: Comparison, taxa: Sequence[Taxonomy], *,
                 records: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                 tags: Mapping[str, Mapping[str, str]] | None = None) -> list[Path]:
    """``report.md``, ``report.html`` (one self-contained file, ``ragbench.compare.html``; ``records``: each
    run's cases.jsonl rows, for its per-question drill-down), ``comparison.json`` and the PNG plots in
    ``folder``; returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    images = write_plots(folder, comp, taxa, labels(comp))
    lab = labels(comp)
    parts = ["# ragbench comparison", "",
             *[f"- {n}" for n in comp.notes], f"- {comp.correction}",
             *([f"- {comp.practical}"] if comp.practical else []), "",
             "## Runs", "", _md_table(("label", "run id", "dataset", "baseline"),
                                      [(lab[r.run_id], r.run_id, r.dataset, lab.get(comp.baseline_of[r.run_id].run_id,
                                                                                   comp.baseline_of[r.run_id].run_id))
                                       for r in comp.runs]),
             "", "## Against the baseline (all question types)", "", _md_table(OVERALL_HEAD, overall_rows(comp)), ""]
    head, rows = type_rows(comp)
    if rows:
        parts += ["## Delta by question type", "", f"{LEGEND}.", "",
                  _md_table(head, rows), ""]
    if taxa:
        parts += ["## Failure taxonomy", "",
                  "Where the gold evidence of each case was lost: not retrieved, ranked below top-k, in the top-k "
                  "but dropped by expansion, or in the context but answered wrong (score < 0.5 on judge accuracy, "
                  "else answer F1).", "", _md_table(("run", "type", *CATEGORIES), taxonomy_rows(comp, taxa)), "",
                  *[f"- {n}" for n in taxonomy_notes(comp, taxa)], ""]
    parts += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in images] + [""]
    report = folder / "report.md"
    report.write_text("\n".join(parts), encoding="utf-8")
    html = write_html(folder / "report.html", comp, taxa, lab, records=records, tags=tags)
    write_json(folder / "comparison.json", comp, taxa)
    return [report, html, folder / "comparison.json", *images]
