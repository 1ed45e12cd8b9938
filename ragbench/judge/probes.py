"""Bias probes of a judge, each a metric with a bootstrap CI over the labelled items it applies to.

- ``position``: the same item judged with its passages in two orders -- reversed when it has two or
  more, else its passage before and after a distractor (the next item's first passage). ``delta`` =
  score(original or evidence-first order) - score(the other order); ``flip_rate`` = how often the
  pass/fail verdict changes. An order-blind judge has both at 0 (after the position-bias studies of
  LLM judges, Zheng et al. 2023 "Judging LLM-as-a-Judge"; Wang et al. 2023 "LLMs are not fair evaluators").
- ``verbosity``: answers the humans passed, padded with a restatement of themselves (twice as long, no
  new claim); ``delta`` = score(padded) - score(original), ``flip_rate`` as above (Zheng et al. 2023).
- ``repeat``: the same verdict asked ``repeats`` times; ``std`` = the population standard deviation
  of an item's scores, ``flip_rate`` = items whose verdicts disagree among themselves.
- ``self_preference``: the judge's error (score - human label, both 0-1) on answers its own model
  wrote (item ``generator`` = the judge's model) minus its error on answers by other models
  (Panickssery et al. 2024 "LLM evaluators recognize and favor their own generations"); ``bias`` > 0:
  the judge is kinder to itself than the humans are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ragbench.judge.agreement import Interval, mean_ci
from ragbench.judge.labels import LabelledItem
from ragbench.types import Answer, Context

if TYPE_CHECKING:
    from ragbench.judge.calibration_settings import Settings

class Scorer(Protocol):
    """Judges (item, contexts, answer); ``ask`` > 0 asks the same again (its own cache record)."""

    def __call__(self, item: LabelledItem, contexts: Sequence[Context], answer: Answer,
                 ask: int = 0) -> dict[str, float] | None: ...

PADDING = "\n\nTo restate the answer above in other words, for clarity: "
DEFINITIONS = {
    "position": "score with the passages in their given (or evidence-first) order minus score in the other order",
    "verbosity": "score of a human-passed answer padded with a restatement of itself minus its score as given",
    "repeat": "population std of an item's scores over repeated asks; flip_rate: items whose verdicts disagree",
    "self_preference": "mean (judge score - human label) on the judge model's own answers minus on other models'",
}


@dataclass(frozen=True)
class ProbeResult:
    """One probe: how many items it measured, its statistics with CIs, and a note when it could not run."""

    n: int
    definition: str
    stats: Mapping[str, Interval]
    note: str = ""


def _score(scores: Mapping[str, float] | None, key: str) -> float | None:
    return None if scores is None else scores.get(key)


def _ci(values: Sequence[float], settings: Settings) -> Interval:
    return mean_ci(values, resamples=settings.resamples, seed=settings.seed, level=settings.level)


def _column(rows: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    """The per-item values of ``key``, in item order, over the items that have one."""
    return [float(r[key]) for r in rows if r.get(key) is not None]


def probe_stats(name: str, rows: Sequence[Mapping[str, Any]], settings: Settings) -> tuple[int, dict[str, Interval]]:
    """A probe's item count and statistics from the per-item values it wrote into the calibration's rows
    (``probe/<name>/...``): the one reading of them, by the probe and by ``ragbench.verify``."""
    if name == "self_preference":
        errors = [(float(r[f"probe/{name}/error"]), bool(r.get(f"probe/{name}/own")))
                  for r in rows if r.get(f"probe/{name}/error") is not None]
        own = [e for e, mine in errors if mine]
        other = [e for e, mine in errors if not mine]
        if not own or not other:
            return len(errors), {}
        return len(errors), {"bias": diff_ci(own, other, resamples=settings.resamples, seed=settings.seed,
                                             level=settings.level)}
    first = "std" if name == "repeat" else "delta"
    values, flips = _column(rows, f"probe/{name}/{first}"), _column(rows, f"probe/{name}/flip")
    if len(values) != len(flips):
        raise ValueError(f"probe {name}: {len(values)} items have a {first} and {len(flips)} a flip")
    return len(values), ({first: _ci(values, settings), "flip_rate": _ci(flips, settings)} if values else {})


def _pairs(name: str, pairs: Sequence[tuple[int, float, float]], rows: list[dict[str, Any]],
           settings: Settings) -> ProbeResult:
    """``delta`` and ``flip_rate`` of (item index, score a, score b) pairs; per-item values into ``rows``."""
    for i, a, b in pairs:
        rows[i][f"probe/{name}/delta"] = a - b
        rows[i][f"probe/{name}/flip"] = float(settings.verdict(a) != settings.verdict(b))
    n, stats = probe_stats(name, rows, settings)
    return ProbeResult(n=n, definition=DEFINITIONS[name], stats=stats,
                       note="" if n else "no item it applies to was judged")


def _map(settings: Settings, fn: Callable[[int], Any], indices: Sequence[int]) -> list[Any]:
    with ThreadPoolExecutor(max_workers=settings.workers) as pool:
        return list(pool.map(fn, indices))


def position(items: Sequence[LabelledItem], base: Sequence[dict[str, float] | None], scorer: Scorer, *,
             settings: Settings, key: str, rows: list[dict[str, Any]]) -> ProbeResult:
    """The ``position`` probe (see the module docstring)."""
    with_passages = [i for i, item in enumerate(items) if item.contexts and base[i] is not None]

    def run(i: int) -> tuple[int, float, float] | None:
        item = items[i]
        answer = item.answer_object()
        n = len(item.contexts)
        if n >= 2:
            a = _score(base[i], key)
            b = _score(scorer(item, item.context_objects(list(reversed(range(n)))), answer), key)
        else:
            others = [j for j in with_passages if j != i]
            if not others:
                return None
            distractor = items[min(others, key=lambda j: (j - i) % len(items))].contexts[0]
            a = _score(scorer(item, item.context_objects([0, 1], extra=[distractor]), answer), key)
            b = _score(scorer(item, item.context_objects([1, 0], extra=[distractor]), answer), key)
        return None if a is None or b is None else (i, a, b)

    pairs = [p for p in _map(settings, run, with_passages) if p is not None]
    return _pairs("position", pairs, rows, settings)


def verbosity(items: Sequence[LabelledItem], base: Sequence[dict[str, float] | None], scorer: Scorer, *,
              settings: Settings, key: str, rubric: str, rows: list[dict[str, Any]]) -> ProbeResult:
    """The ``verbosity`` probe: only answers the humans passed (the top label), so padding is the only change."""
    top = 1 if settings.scale == "binary" else settings.max_score
    chosen = [i for i, item in enumerate(items) if item.labels.get(rubric) == top and _score(base[i], key) is not None]

    def run(i: int) -> tuple[int, float, float] | None:
        item = items[i]
        padded = scorer(item, item.context_objects(), item.answer_object(item.answer + PADDING + item.answer))
        b = _score(padded, key)
        a = _score(base[i], key)
        return None if a is None or b is None else (i, b, a)

    pairs = [p for p in _map(settings, run, chosen) if p is not None]
    return _pairs("verbosity", pairs, rows, settings)


def repeat(items: Sequence[LabelledItem], base: Sequence[dict[str, float] | None], scorer: Scorer, *,
           settings: Settings, key: str, rows: list[dict[str, Any]]) -> ProbeResult:
    """The ``repeat`` probe: ``settings.repeats`` asks in all (the first is the calibration's own)."""
    chosen = [i for i in range(len(items)) if _score(base[i], key) is not None]

    def run(i: int) -> tuple[int, list[float]]:
        item = items[i]
        again = [_score(scorer(item, item.context_objects(), item.answer_object(), ask=n), key)
                 for n in range(1, settings.repeats)]
        return i, [s for s in [_score(base[i], key), *again] if s is not None]

    for i, scores in _map(settings, run, chosen):
        if len(scores) < 2:
            continue
        rows[i]["probe/repeat/std"] = float(np.std(scores))
        rows[i]["probe/repeat/flip"] = float(len({settings.verdict(s) for s in scores}) > 1)
    n, stats = probe_stats("repeat", rows, settings)
    return ProbeResult(n=n, definition=DEFINITIONS["repeat"], stats=stats, note="" if n else "no item was judged twice")


def _own(generator: str | None, model: str | None) -> bool:
    if not generator or not model:
        return False
    return generator in (model, model.split("/", 1)[-1])


def diff_ci(a: Sequence[float], b: Sequence[float], *, resamples: int, seed: int, level: float) -> Interval:
    """mean(a) - mean(b) of two independent groups, with a percentile bootstrap CI (each group resampled)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    rng = np.random.default_rng([seed, len(x), len(y), 11])
    boot = x[rng.integers(0, len(x), (resamples, len(x)))].mean(axis=1) - \
        y[rng.integers(0, len(y), (resamples, len(y)))].mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(boot, [tail, 1.0 - tail])
    return Interval(float(x.mean() - y.mean()), float(low), float(high))


def self_preference(items: Sequence[LabelledItem], base: Sequence[dict[str, float] | None], *, settings: Settings,
                    key: str, rubric: str, judge_model: str | None, rows: list[dict[str, Any]]) -> ProbeResult:
    """The ``self_preference`` probe: no new request, the calibration's own verdicts split by generator."""
    for i, item in enumerate(items):
        score = _score(base[i], key)
        if score is None or rubric not in item.labels or not item.generator:
            continue
        rows[i]["probe/self_preference/error"] = score - settings.human_score(item.labels[rubric])
        rows[i]["probe/self_preference/own"] = float(_own(item.generator, judge_model))
    n, stats = probe_stats("self_preference", rows, settings)
    own = int(sum(r.get("probe/self_preference/own") or 0 for r in rows))
    if not stats:
        return ProbeResult(n=n, definition=DEFINITIONS["self_preference"], stats={},
                           note=f"needs labelled answers by the judge's model ({judge_model}) and by other models "
                                f"(item 'generator'); found {own} and {n - own}")
    return ProbeResult(n=n, definition=DEFINITIONS["self_preference"], stats=stats,
                       note=f"{own} answers by the judge's model, {n - own} by others")


def run_probe(name: str, items: Sequence[LabelledItem], base: Sequence[dict[str, float] | None], scorer: Scorer, *,
              settings: Settings, rubric: str, judge_model: str | None, rows: list[dict[str, Any]]) -> ProbeResult:
    """One probe by name, on the scores of ``rubric``'s judge key."""
    key = settings.key(rubric)
    if name == "position":
        return position(items, base, scorer, settings=settings, key=key, rows=rows)
    if name == "verbosity":
        return verbosity(items, base, scorer, settings=settings, key=key, rubric=rubric, rows=rows)
    if name == "repeat":
        return repeat(items, base, scorer, settings=settings, key=key, rows=rows)
    return self_preference(items, base, settings=settings, key=key, rubric=rubric, judge_model=judge_model, rows=rows)
