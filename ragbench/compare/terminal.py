"""A comparison in an 80-column terminal: per dataset, one small table per metric (the baseline first,
then each run against it), the deltas by question type and the failure taxonomy, columns that would not fit
split off into a further table. Nothing wraps but a run label."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ragbench import stats
from ragbench.compare.comparison import ALL, BASELINE, TURN, Comparison, Record
from ragbench.compare.ppi import PPIResult
from ragbench.compare.taxonomy import (
    ANSWERED_RIGHT,
    ANSWERED_WRONG,
    BELOW_K,
    CATEGORIES,
    FAILED,
    LOST_BY_EXPANSION,
    NO_GOLD,
    NOT_RETRIEVED,
    Taxonomy,
)
from ragbench.tracking.run_names import job_labels

WIDTH = 80
VERDICT = {stats.BETTER: "▲ better", stats.WORSE: "▼ worse", stats.NEGLIGIBLE: "~ too small",
           stats.SAME: "· not sig.", BASELINE: "= baseline"}
MARK = {stats.BETTER: "▲", stats.WORSE: "▼", stats.NEGLIGIBLE: "~", stats.SAME: "·", BASELINE: "="}
_STYLE = {stats.BETTER: "green", stats.WORSE: "red", BASELINE: "bold", stats.SAME: "dim",
          stats.NEGLIGIBLE: "dim"}
LEGEND = ("verdicts (Holm-adjusted p < {alpha:g}): ▲ better, ▼ worse, ~ too small (significant, |delta| "
          "below the practical threshold), · not sig. (no detectable difference); the 95% CIs are per "
          "comparison, not Holm-adjusted, so one may exclude 0 beside '· not sig.'")
CATEGORY_LABEL = {NOT_RETRIEVED: "not ret.", BELOW_K: "below k", LOST_BY_EXPANSION: "lost exp.",
                  ANSWERED_WRONG: "wrong", ANSWERED_RIGHT: "right", FAILED: "failed", NO_GOLD: "no gold"}
CATEGORY_LEGEND = ("not ret. = gold not retrieved, below k = retrieved below top-k, lost exp. = in the "
                   "top-k but lost by expansion, wrong / right = in the context and answered wrong / right, "
                   "no gold = no gold evidence matched")


def _num(x: float) -> str:
    if x != x:  # NaN
        return "-"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def _delta(x: float, digits: int = 4) -> str:
    return "0" if x == 0 else f"{x:+,.0f}" if abs(x) >= 1000 else f"{x:+.{digits}g}"


def _p(x: float) -> str:
    return "1" if x >= 1 else f"{x:.2g}" if x >= 1e-4 else "<1e-4"


def short_metric(name: str) -> str:
    """A metric's column label: its last segment, ``_at_`` as ``@`` (``retrieval/hit_at_5`` -> ``hit@5``)."""
    return name.rsplit("/", 1)[-1].replace("_at_", "@")


def metric_labels(names: Sequence[str]) -> dict[str, str]:
    """Each metric's column label: ``short_metric`` when no two metrics share it, else the full name."""
    short = [short_metric(n) for n in names]
    return {n: s if short.count(s) == 1 else n for n, s in zip(names, short, strict=True)}


def dataset_labels(comp: Comparison) -> dict[str, dict[str, str]]:
    """Per dataset, each run's label among that dataset's runs only (``topk=5 #3``: the dataset is the
    table's title, so it is no part of the label)."""
    out: dict[str, dict[str, str]] = {}
    for ds in dict.fromkeys(r.dataset for r in comp.runs):
        runs = [r for r in comp.runs if r.dataset == ds]
        named = {r.run_id: r.name for r in runs}
        labels = job_labels(named) if all(named.values()) else {}
        out[ds] = {rid: labels.get(rid) or name or rid[:8] for rid, name in named.items()}
    return out


def _table(title: str, *, style_title: bool = True) -> Table:
    return Table(title=escape(title) if style_title else title, title_justify="left", box=box.SIMPLE_HEAD,
                 min_width=min(len(title), WIDTH),  # a narrow table never folds its title
                 pad_edge=False, show_edge=False, padding=(0, 1, 0, 0))  # columns 2 apart: space, divider


def _fits(first: int, widths: Sequence[int], width: int) -> list[list[int]]:
    """Column indexes grouped into tables that fit ``width`` beside a first column ``first`` wide."""
    groups: list[list[int]] = [[]]
    used = first
    for i, w in enumerate(widths):
        if groups[-1] and used + 2 + w > width:
            groups.append([])
            used = first
        groups[-1].append(i)
        used += 2 + w
    return [g for g in groups if g]


def overall_tables(comp: Comparison) -> list[Table]:
    """Per dataset and metric: the baseline's value, then each run's value, delta, CI, Holm p and verdict."""
    labels = dataset_labels(comp)
    tables = []
    for ds, lab in labels.items():
        for spec in comp.metrics:
            recs = [r for r in comp.records if r.type == ALL and r.metric == spec.name and r.run in lab]
            if not recs:
                continue
            direction = "lower" if spec.lower_is_better else "higher"
            table = _table(f"{ds}: {spec.name} ({direction} is better)")
            for head, justify in (("run", "left"), ("n", "right"), ("value", "right"), ("delta", "right"),
                                  ("95% CI", "right"), ("p Holm", "right"), ("verdict", "left")):
                table.add_column(head, justify=justify,  # type: ignore[arg-type]
                                 no_wrap=head != "run", overflow="fold")
            bases = [r for r in recs if r.verdict == BASELINE]
            if not bases:  # baselines from --baseline-file (one per config): not compared runs, values only
                for b in {r.baseline: r for r in recs}.values():
                    table.add_row(escape(f"{b.baseline_name or b.baseline[:8]} (file)"), "",
                                  _num(b.baseline_value), "", "", "", VERDICT[BASELINE], style="bold")
            for r in bases + [r for r in recs if r.verdict != BASELINE]:
                cells = ("", "", "") if r.verdict == BASELINE else (
                    _delta(r.delta), f"[{_delta(r.ci_low, 3)}, {_delta(r.ci_high, 3)}]", _p(r.p_holm))
                table.add_row(escape(lab[r.run]), str(r.n), _num(r.value), *cells,
                              f"[{_STYLE[r.verdict]}]{VERDICT[r.verdict]}[/]")
            tables.append(table)
    return tables


def type_tables(comp: Comparison, width: int = WIDTH) -> list[Table]:
    """Per dataset: each run (a row) and its question types (indented rows below it), one ``delta mark`` cell
    per metric; metrics that do not fit ``width`` go to a further table."""
    names = [s.name for s in comp.metrics]
    heads = metric_labels(names)
    labels = dataset_labels(comp)
    tables = []
    for ds, lab in labels.items():
        cells: dict[str, dict[str, dict[str, Record]]] = {}
        for r in comp.records:
            if r.type != ALL and not r.type.startswith(TURN) and r.verdict != BASELINE and r.run in lab:
                cells.setdefault(r.run, {}).setdefault(r.type, {})[r.metric] = r
        if not cells:
            continue
        rows: list[tuple[str, dict[str, str]]] = []
        for run, types in cells.items():
            rows.append((f"[bold]{escape(lab[run])}[/]", {}))
            for qtype, recs in types.items():
                rows.append((escape(f"  {qtype}"), {m: f"{_delta(r.delta, 3)} {MARK[r.verdict]}"
                                                    for m, r in recs.items()}))
        first = max(len(lab[run]) for run in cells)
        first = max(first, *(len(t) + 2 for types in cells.values() for t in types), len("run / type"))
        widths = [max(len(heads[m]), *(len(c.get(m, "-")) for _, c in rows)) for m in names]
        groups = _fits(min(first, width // 3), widths, width)
        for g, cols in enumerate(groups):
            more = f" ({g + 1} of {len(groups)})" if len(groups) > 1 else ""
            table = _table(f"{ds}: delta by question type{more}")
            table.add_column("run / type", overflow="fold")
            for i in cols:
                table.add_column(escape(heads[names[i]]), justify="right", no_wrap=True)
            for first_cell, c in rows:
                table.add_row(first_cell, *(c.get(names[i], "" if not c else "-") for i in cols))
            tables.append(table)
    return tables


def turn_tables(comp: Comparison) -> list[Table]:
    """Per dataset with conversations: each run's delta on each metric per turn index (``turn=1``, ``turn=2``,
    ``turn=3plus``), with its CI and verdict (Holm over the run's types and turns, per metric)."""
    labels = dataset_labels(comp)
    names = [s.name for s in comp.metrics]
    tables = []
    for ds, lab in labels.items():
        recs = [r for r in comp.records if r.type.startswith(TURN) and r.verdict != BASELINE and r.run in lab]
        if not recs:
            continue
        table = _table(f"{ds}: delta by conversation turn")
        for head, justify in (("run / turn", "left"), ("metric", "left"), ("n", "right"), ("delta", "right"),
                              ("95% CI", "right"), ("verdict", "left")):
            table.add_column(head, justify=justify,  # type: ignore[arg-type]
                             no_wrap=head != "run / turn", overflow="fold")
        for run in dict.fromkeys(r.run for r in recs):
            table.add_row(f"[bold]{escape(lab[run])}[/]", "", "", "", "", "")
            mine = sorted((r for r in recs if r.run == run), key=lambda r: (r.type, names.index(r.metric)))
            for r in mine:
                table.add_row(escape(f"  {r.type}"), escape(short_metric(r.metric)), str(r.n), _delta(r.delta, 3),
                              f"[{_delta(r.ci_low, 3)}, {_delta(r.ci_high, 3)}]",
                              f"[{_STYLE[r.verdict]}]{VERDICT[r.verdict]}[/]")
        tables.append(table)
    return tables


MDE_LEGEND = ("MDE: the smallest |delta| these n cases detect with power {power:g} by a two-sided paired "
              "t-test at the level shown (alpha / m, m = the Holm family's size), from the sd of the paired "
              "differences (noncentral t, as statsmodels' TTestPower); 'none' = n pairs cannot reach that p; "
              "runs that score every case alike are left out")


def _mde(x: float) -> str:
    return "none" if x == float("inf") else _num(x)


def mde_tables(comp: Comparison) -> list[Table]:
    """Per dataset: each overall comparison with no detectable difference, its n, the paired differences'
    sd, the Holm level and the minimum detectable effect (``Record.mde``)."""
    labels = dataset_labels(comp)
    heads = metric_labels([s.name for s in comp.metrics])
    tables = []
    for ds, lab in labels.items():
        recs = [r for r in comp.records if r.type == ALL and r.run in lab and r.verdict == stats.SAME
                and r.mde == r.mde]  # NaN: a percentile, under 2 cases, or every case alike
        if not recs:
            continue
        table = _table(f"{ds}: not significant, minimum detectable effect (power {comp.power:g})")
        for head in ("run", "metric", "n", "|delta|", "sd(diff)", "level", "MDE"):
            table.add_column(head, justify="left" if head in ("run", "metric") else "right",
                             no_wrap=head != "run", overflow="fold")
        for r in recs:
            table.add_row(escape(lab[r.run]), escape(heads[r.metric]), str(r.n), _num(abs(r.delta)),
                          _num(r.diff_sd), f"{r.mde_alpha:.2g}", _mde(r.mde))
        tables.append(table)
    return tables


PPI_LEGEND = ("PPI: prediction-powered estimate of the human score (Angelopoulos et al. 2023, no power "
              "tuning): mean judge score of the N unlabelled cases minus the judge's mean error on the n "
              "human-labelled ones, with its 95% CLT interval; judge: the judge-only mean over all cases")


def ppi_tables(comp: Comparison, results: Sequence[PPIResult]) -> list[Table]:
    """Per judge metric: each labelled run's judge-only and prediction-powered estimate, with 95% CIs."""
    labels = {rid: lab for lab_of in dataset_labels(comp).values() for rid, lab in lab_of.items()}
    tables = []
    for metric in dict.fromkeys(r.metric for r in results):
        table = _table(f"{metric}: judge only and prediction-powered (PPI)")
        for head in ("run", "n/N", "judge", "95% CI", "PPI", "95% CI"):
            table.add_column(head, justify="left" if head == "run" else "right", no_wrap=head != "run",
                             overflow="fold")
        for r in (r for r in results if r.metric == metric):
            table.add_row(escape(labels.get(r.run, r.run_name or r.run[:8])), f"{r.labelled}/{r.unlabelled}",
                          f"{r.judge.value:.3f}", f"[{r.judge.low:.3f}, {r.judge.high:.3f}]",
                          f"{r.ppi.value:.3f}", f"[{r.ppi.low:.3f}, {r.ppi.high:.3f}]")
        tables.append(table)
    return tables


def print_ppi(console: Console, comp: Comparison, results: Sequence[PPIResult]) -> None:
    """``--ppi``: the legend and a table per judge metric (``ragbench.compare.ppi``)."""
    console.print(f"[dim]•[/dim] {escape(PPI_LEGEND)}")
    for table in ppi_tables(comp, results):
        console.print(table)


def taxonomy_tables(comp: Comparison, taxa: Sequence[Taxonomy]) -> list[Table]:
    """Per dataset: each run's cases by where the gold evidence was lost (its ``all`` row), its types
    below."""
    labels = dataset_labels(comp)
    tables = []
    for ds, lab in labels.items():
        mine = [t for t in taxa if t.run in lab]
        if not mine:
            continue
        table = _table(f"{ds}: failure taxonomy (cases)")
        table.add_column("run / type", overflow="fold")
        for c in CATEGORIES:
            table.add_column(CATEGORY_LABEL[c], justify="right", no_wrap=True)
        for t in mine:
            for qtype, counts in t.counts.items():
                head = f"[bold]{escape(lab[t.run])}[/]" if qtype == ALL else escape(f"  {qtype}")
                table.add_row(head, *(str(counts.get(c, 0)) for c in CATEGORIES))
        tables.append(table)
    return tables


def print_comparison(console: Console, comp: Comparison, taxa: Sequence[Taxonomy],
                     notes: Sequence[str]) -> None:
    """The terminal view: ``notes``, the tables per metric, the deltas by type, the failure taxonomy."""
    for note in (*comp.notes, comp.correction, *([comp.practical] if comp.practical else [])):
        console.print(f"[dim]•[/dim] {escape(note)}")
    console.print(f"[dim]•[/dim] {escape(LEGEND.format(alpha=comp.alpha))}")
    for table in overall_tables(comp):
        console.print(table)
    tables = mde_tables(comp)  # what each "not sig." could have detected (ragbench.compare.power)
    if tables:
        console.print(f"[dim]•[/dim] {escape(MDE_LEGEND.format(power=comp.power))}")
    for table in tables:
        console.print(table)
    names = [s.name for s in comp.metrics]
    shortened = {m: h for m, h in metric_labels(names).items() if h != m}
    tables = type_tables(comp)
    if tables and shortened:
        console.print("[dim]•[/dim] by question type, columns: "
                      + escape(", ".join(f"{h} = {m}" for m, h in shortened.items())))
    for table in tables:
        console.print(table)
    for table in turn_tables(comp):  # conversations: the gap per turn index, with its CI
        console.print(table)
    tables = taxonomy_tables(comp, taxa)
    if tables:
        console.print(f"[dim]•[/dim] {CATEGORY_LEGEND}")
    for table in tables:
        console.print(table)
    for note in notes:
        console.print(f"[dim]•[/dim] {escape(note)}")
