"""Runs against their baseline: who is compared with whom, then one record per (run, metric, type)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragbench import stats
from ragbench.compare import power as power_mod
from ragbench.compare.metrics import MetricSpec, metric_spec
from ragbench.compare.runcases import RunCases, repeat_values
from ragbench.errors import ConfigError
from ragbench.tracking.runs_table import tied

ALL = "all"  # the type of the overall record
TAG = "tag="  # the type of a record over the cases carrying a tag (the custom format's `tags`): tag=travel
TURN = "turn="  # the type of a record over a conversation turn index: turn=1, turn=2, turn=3plus
# the smallest significance level: a p-value below alpha is re-estimated with 2 m / alpha randomisations
# (``_refine``), 20,000 per comparison here; a smaller alpha asks for more than any comparison can run
MIN_ALPHA = 1e-4
BASELINE = "baseline"


@dataclass(frozen=True)
class Record:
    """One run against its baseline on one metric and one question type (``all`` = every type)."""

    run: str
    run_name: str
    baseline: str
    baseline_name: str
    metric: str
    type: str
    n: int
    value: float
    baseline_value: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    p_holm: float
    verdict: str
    lower_is_better: bool
    min_effect: float = 0.0  # the practical threshold at this baseline value: a smaller |delta| gets no verdict
    # not significant (mean metrics): the smallest |delta| these n cases detect with probability ``power`` at
    # level ``mde_alpha`` (alpha / the Holm family's size), from the paired differences' sd (compare.power)
    mde: float = float("nan")
    mde_alpha: float = float("nan")
    diff_sd: float = float("nan")  # the standard deviation (ddof 1) of the paired differences

    def json(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Comparison:
    """Everything a comparison decided, for the table, the JSON, the report and the gate."""

    records: tuple[Record, ...]
    runs: tuple[RunCases, ...]
    baseline_of: dict[str, RunCases]
    metrics: tuple[MetricSpec, ...]
    notes: tuple[str, ...]
    resamples: int
    seed: int
    alpha: float
    level: float
    correction: str = field(default="")
    practical: str = field(default="")  # the practical thresholds, said once (see metrics.MinEffect)
    rank_by: str = field(default="")  # the sweep's ranking metric (runs_table.ranking_metric): the default baseline's
    power: float = field(default=power_mod.DEFAULT_POWER)  # the power of the MDEs (Record.mde)


def headline(run: RunCases, spec: MetricSpec) -> float:
    """The run's own value of a metric over all its cases (NaN when it has none)."""
    x = run.values(spec)
    x = x[np.isfinite(x)]
    return float(stats.STATISTICS[spec.statistic](x)) if len(x) else float("nan")


def rank_value(run: RunCases, metric: str) -> float:
    """The run's value of the sweep's ranking metric (``runs_table.ranking_metric``): its logged value, the
    number the sweep table ranks by, else (a run without logged metrics) the mean of its per-case values
    (``_at_topk`` read at the run's own k); NaN when it has neither."""
    logged = run.metrics.get(metric)
    if isinstance(logged, int | float) and math.isfinite(logged):
        return float(logged)
    key = metric.replace("_at_topk", f"_at_{run.topk}") if run.topk else metric
    return headline(run, metric_spec(key))


def best_configuration(runs: Sequence[RunCases], metric: str) -> RunCases:
    """The best configuration on the ranking ``metric`` -- the sweep table's first row: baselines
    (``RunCases.baseline``: retrieval=oracle / none) never, unless every run is one; the earliest on a tie
    (runs come oldest first); a run without the metric never wins."""
    lower = metric_spec(metric).lower_is_better
    pool = [r for r in runs if not r.baseline] or list(runs)

    def key(r: RunCases) -> float:
        v = rank_value(r, metric)
        return float("-inf") if np.isnan(v) else (-v if lower else v)
    return max(pool, key=key)


def pair_up(runs: Sequence[RunCases], rank_by: str, *, baseline: str | None = None,
            baseline_runs: Sequence[RunCases] = ()) -> tuple[dict[str, RunCases], list[str]]:
    """Each run's baseline, and notes saying how it was chosen. Without a named baseline, runs are
    grouped by dataset and each group's best configuration on ``rank_by`` (the sweep's ranking metric,
    ``runs_table.ranking_metric``) is its baseline."""
    notes: list[str] = []
    out: dict[str, RunCases] = {}
    if baseline_runs:
        for r in runs:
            same = [b for b in baseline_runs if b.dataset == r.dataset]
            exact = [b for b in same if b.config == r.config]
            if exact or len(same) == 1:
                out[r.run_id] = (exact or same)[0]
                continue
            held = "; ".join(f"{b.dataset} '{b.config}'" for b in baseline_runs)
            what = "no run on dataset" if not same else "several runs on dataset"
            raise ConfigError(f"baseline file {baseline_runs[0].source}: {what} {r.dataset} and none with the config "
                              f"'{r.config}' of run {r.run_id}; it holds {held}. Save the baseline from the same "
                              f"sweep command, or select matching runs")
        notes.append(f"baseline: the runs of {baseline_runs[0].source}, matched by dataset and config")
        return out, notes
    if baseline:
        hits = [r for r in runs if r.run_id == baseline or r.name == baseline
                or (len(baseline) >= 6 and r.run_id.startswith(baseline))]
        if len(hits) != 1:
            known = ", ".join(f"{r.run_id[:8]} ({r.name})" for r in runs)
            raise ConfigError(f"--baseline {baseline!r} matches {len(hits)} of the selected runs; give a run id or "
                              f"name of one of: {known}")
        base = hits[0]
        other = sorted({r.dataset for r in runs if r.dataset != base.dataset})
        if other:
            raise ConfigError(f"the baseline {base.run_id} is on dataset {base.dataset} but runs on {', '.join(other)} "
                              f"are selected; compare one dataset at a time "
                              f"(--filter \"tags.`ragbench.dataset` = '{base.dataset}'\")")
        notes.append(f"baseline: {base.name or base.run_id} ({base.run_id}), given by --baseline")
        return {r.run_id: base for r in runs}, notes
    for dataset in sorted({r.dataset for r in runs}):
        group = [r for r in runs if r.dataset == dataset]
        base = best_configuration(group, rank_by)
        configs = [r for r in group if not r.baseline]
        bases = len(group) - len(configs)
        of = (f"the best of {len(configs)} configurations" + (f" ({bases} baseline run{'s' if bases > 1 else ''} "
                                                              "not considered)" if bases else "")
              if configs else f"the best of {len(group)} runs, all baselines")
        best = rank_value(base, rank_by)
        level = [r for r in (configs or group) if r is not base and tied(rank_value(r, rank_by), best)]
        tie = f", tied with {len(level)} other{'s' * (len(level) > 1)} (the earliest taken)" if level else ""
        notes.append(f"baseline{f' for {dataset}' if len({r.dataset for r in runs}) > 1 else ''}: "
                     f"{base.name or base.run_id} ({base.run_id}), {of} on {rank_by}, the sweep table's ranking "
                     f"metric ({rank_value(base, rank_by):.4g}){tie}; name another with --baseline")
        out.update({r.run_id: base for r in group})
    return out, notes


def _shared(run: RunCases, base: RunCases, notes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    if run.dataset != base.dataset:
        raise ConfigError(f"run {run.run_id} is on dataset {run.dataset} and its baseline {base.run_id} on "
                          f"{base.dataset}; compare runs of one dataset")
    where = {q: i for i, q in enumerate(base.qids)}
    ia = np.array([i for i, q in enumerate(run.qids) if q in where], dtype=np.int64)
    ib = np.array([where[run.qids[i]] for i in ia], dtype=np.int64)
    if len(ia) == 0:
        raise ConfigError(f"run {run.run_id} and baseline {base.run_id} share no case id on {run.dataset}; "
                          "compare runs of the same questions (same dataset sample)")
    if len(ia) < max(len(run.qids), len(base.qids)):
        notes.append(f"{run.name or run.run_id}: compared on the {len(ia)} cases it shares with the baseline "
                     f"(run {len(run.qids)} cases, baseline {len(base.qids)})")
    return ia, ib


def compare(runs: Sequence[RunCases], baseline_of: dict[str, RunCases], specs: Sequence[MetricSpec], *,
            resamples: int = 2000, seed: int = 0, alpha: float = 0.05, level: float = 0.95,
            notes: Sequence[str] = (), power: float = power_mod.DEFAULT_POWER) -> Comparison:
    """Every run against its baseline, per metric, overall and per question type, Holm-corrected."""
    if (problem := alpha_problem(alpha)) is not None:
        raise ConfigError(problem)
    notes = list(notes)
    raw: list[dict] = []
    for run in runs:
        base = baseline_of[run.run_id]
        ia, ib = _shared(run, base, notes)
        types = np.asarray(base.types, dtype=object)[ib]
        for spec in specs:
            a, b = run.values(spec)[ia], base.values(spec)[ib]
            reps = (repeat_values(run, spec), repeat_values(base, spec)) if run is not base else (None, None)
            scored = np.isfinite(a) & np.isfinite(b)
            if not scored.any():
                if run is not base and (np.isfinite(a).any() or np.isfinite(b).any()):
                    notes.append(f"{run.name or run.run_id}: {spec.name} not compared: one side never measured it "
                                 "(e.g. an LLM judge none of whose verdicts parsed)")
                continue
            for qtype, m in [(ALL, scored), *((t, scored & (types == t)) for t in sorted(set(types[scored]))),
                             *turn_masks(base.fields.get("turn"), ib, scored),  # conversations: per turn
                             *tag_masks(base.tags, ib, scored)]:  # tagged cases: per tag (by_tag/*)
                common = {"run": run.run_id, "run_name": run.name, "baseline": base.run_id,
                          "baseline_name": base.name, "metric": spec.name, "type": qtype,
                          "lower_is_better": spec.lower_is_better}
                if run is base:
                    v = float(stats.STATISTICS[spec.statistic](a[m]))
                    raw.append({**common, "n": int(m.sum()), "value": v, "baseline_value": v, "delta": 0.0,
                                "ci_low": 0.0, "ci_high": 0.0, "p_value": 1.0, "verdict": BASELINE,
                                "min_effect": spec.min_effect.at(v)})
                    continue
                raw.append({**common, "_pair": (a[m], b[m], spec.statistic), "_spec": spec,
                            "_repeats": repeat_pairs(reps, ia, ib, m, a[m], b[m])})
    # Compared by sample size: the comparisons of one size share their resample matrices (stats._weights
    # keeps a few), which run-by-run order rebuilt for every run x metric x question type. The draws depend
    # only on (n, resamples, seed), so the order changes no number.
    for r in sorted((r for r in raw if "_pair" in r), key=lambda r: len(r["_pair"][0])):
        a, b, statistic = r["_pair"]
        pr = stats.paired(a, b, statistic=statistic, resamples=resamples, seed=seed, level=level,
                          repeats=r["_repeats"])  # repeats=N: a two-level bootstrap CI
        r.update({"n": pr.n, "value": pr.value, "baseline_value": pr.baseline_value, "delta": pr.delta,
                  "ci_low": pr.ci_low, "ci_high": pr.ci_high, "p_value": pr.p_value,
                  "min_effect": r["_spec"].min_effect.at(pr.baseline_value)})
    if any(r.get("_repeats") is not None for r in raw):
        notes.append("runs with repeats (repeats=N): their CIs are two-level bootstrap intervals, the cases and then "
                     "each case's repeats resampled, so the repeat-to-repeat noise is in them (docs/comparing.md)")
    missing = sorted({s.name for s in specs} - {r["metric"] for r in raw})
    if missing:
        notes.append(f"not compared (no run has per-case values for it): {', '.join(missing)}")
    compared = [r for r in raw if r.get("verdict") != BASELINE]
    overall = [r for r in compared if r["type"] == ALL]
    families = [overall] + list(_group(r for r in compared if r["type"] != ALL).values())
    refined = 0
    for family in families:
        refined += _refine(family, resamples=resamples, seed=seed, alpha=alpha)
        for r, p in zip(family, stats.holm([r["p_value"] for r in family]), strict=True):
            r["p_holm"] = p
            r["verdict"] = stats.verdict(r["delta"], p, lower_is_better=r["lower_is_better"], alpha=alpha,
                                         min_effect=r["min_effect"])
        add_mde(family, alpha=alpha, power=power)
    for r in raw:
        r.setdefault("p_holm", 1.0)
        r.pop("_pair", None)
        r.pop("_spec", None)
        r.pop("_repeats", None)
    correction = (f"Holm correction over the {len(overall)} overall comparisons (run x metric) and, per run and "
                  f"metric, over its question types; verdicts at adjusted p < {alpha:g}; {level:.0%} paired "
                  f"bootstrap CIs ({resamples} resamples, seed {seed}); p-values from a paired sign-flip "
                  f"randomisation test" + (f" ({refined} p-values below {alpha:g} re-estimated with more "
                                           "randomisations, so that the smallest attainable p can pass Holm)"
                                           if refined else ""))
    stats.release()
    return Comparison(records=tuple(Record(**r) for r in raw), runs=tuple(runs), baseline_of=dict(baseline_of),
                      metrics=tuple(specs), notes=tuple(notes), resamples=resamples, seed=seed, alpha=alpha,
                      level=level, correction=correction, practical=practical_note(specs), power=power)


def repeat_pairs(reps: tuple[tuple[list[np.ndarray], str] | None, tuple[list[np.ndarray], str] | None],
                 ia: np.ndarray, ib: np.ndarray, m: np.ndarray, a: np.ndarray, b: np.ndarray
                 ) -> tuple[list[np.ndarray], list[np.ndarray], tuple[str, str]] | None:
    """The compared cases' repeat values on each side (``repeat_values``, picked by the pairing ``ia``/``ib``
    and the mask ``m``; a side without repeats: each case's one value of ``a`` / ``b``, the compared values)
    with the sides' reducers, for ``stats.two_level_ci``; None when neither side repeated."""
    ra, rb = reps
    if ra is None and rb is None:
        return None
    keep = np.flatnonzero(m)
    side_a = [ra[0][ia[j]] for j in keep] if ra is not None else [np.array([v]) for v in a]
    side_b = [rb[0][ib[j]] for j in keep] if rb is not None else [np.array([v]) for v in b]
    return side_a, side_b, (ra[1] if ra is not None else "mean", rb[1] if rb is not None else "mean")


def add_mde(family: list[dict], *, alpha: float, power: float) -> None:
    """Each not-significant record of a Holm ``family`` (on a mean) gets its paired differences' sd and its
    minimum detectable effect at ``power``, at level alpha / m (m: the family's size): a p below alpha / m
    passes Holm whatever the other comparisons' p-values, the level a detection can count on."""
    level = alpha / max(len(family), 1)
    for r in family:
        a, b, statistic = r["_pair"]
        if statistic != "mean":  # a percentile's difference is no mean of differences: no t-based MDE
            continue
        sd = power_mod.difference_sd(a, b)
        r["diff_sd"] = sd
        if r["verdict"] == stats.SAME and sd > 0:  # sd 0: every case scored alike, nothing to size from
            r["mde"], r["mde_alpha"] = power_mod.mde(sd, len(a), level, power), level


def turn_masks(turn: np.ndarray | None, ib: np.ndarray, scored: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """The compared cases of each conversation turn index (``turn=1``, ``turn=2``, ``turn=3plus``; the
    ``by_turn`` groups of ``ragbench.judge.conversation``), from the case records' ``turn``; none without."""
    if turn is None:
        return []
    t = turn[ib]
    groups = [("1", t == 1), ("2", t == 2), ("3plus", t >= 3)]
    return [(f"{TURN}{name}", scored & m) for name, m in groups if (scored & m).any()]


def tag_masks(tags: Sequence[Sequence[str]], ib: np.ndarray, scored: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """The compared cases carrying each tag (``tag=<tag>``; a case counts in each of its tags, as in the
    job's ``by_tag/*``), from the baseline's case tags; none without."""
    if not tags:
        return []
    picked = [tags[i] for i in ib]
    out = []
    for tag in sorted({t for ts in picked for t in ts}):
        m = scored & np.array([tag in ts for ts in picked], dtype=bool)
        if m.any():
            out.append((f"{TAG}{tag}", m))
    return out


def alpha_problem(alpha: float) -> str | None:
    """Why ``alpha`` cannot be a significance level (one line naming the fix), or None."""
    if math.isfinite(alpha) and MIN_ALPHA <= alpha < 1:
        return None
    return f"--alpha {alpha!r}: use a number from {MIN_ALPHA:g} up to 1 (not 1), e.g. 0.05 (the default)"


def practical_note(specs: Sequence[MetricSpec]) -> str:
    """The practical thresholds in one sentence (each metric's, and where it comes from)."""
    said = "; ".join(f"{s.name} {s.min_effect.describe(' ms' if s.name.startswith('latency/') else '')}"
                     + (" (--min-effect)" if s.min_effect_given else "") for s in specs)
    return (f"practical thresholds (|delta| a verdict needs besides significance; a smaller significant difference "
            f"is '{stats.NEGLIGIBLE}'; --min-effect METRIC=VALUE sets one): {said}")


def _group(records: Iterable[dict]) -> dict[tuple[str, str], list[dict]]:
    out: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        out.setdefault((r["run"], r["metric"]), []).append(r)
    return out


def _refine(family: list[dict], *, resamples: int, seed: int, alpha: float) -> int:
    """A Monte Carlo p is at least 1 / (1 + resamples), which Holm over m comparisons multiplies by m: with
    too few randomisations no difference could ever be significant. p-values below ``alpha`` (the only
    ones that can pass) are re-estimated with 2 m / alpha randomisations; returns how many were."""
    need = math.ceil(2 * len(family) / alpha)
    if need <= resamples:
        return 0
    count = 0
    for r in family:
        if r["p_value"] < alpha:
            a, b, statistic = r["_pair"]
            r["p_value"], _ = stats.sign_flip_pvalue(a, b, statistic=stats.STATISTICS[statistic],
                                                     resamples=need, seed=seed)
            count += 1
    return count


def regressions(comp: Comparison, *, tolerance: float = 0.0) -> list[Record]:
    """Overall records significantly worse than their baseline by more than ``tolerance`` (absolute)."""
    return [r for r in comp.records
            if r.type == ALL and r.verdict == stats.WORSE and abs(r.delta) > tolerance]
