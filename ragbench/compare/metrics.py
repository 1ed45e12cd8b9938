"""What a compared metric is: its per-case key, its statistic, its direction, how a failed case counts, and the
smallest difference worth a verdict (its practical threshold)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from ragbench.metric_keys import metric_info

_LATENCY = re.compile(r"^latency/(?P<stage>[a-z_]+)_(?P<stat>p50|p95)_ms$")

DEFAULTS = ("answer/f1", "judge/accuracy", "retrieval/hit_at_5", "retrieval/mrr_at_10", "retrieval/hop/coverage",
            "context/tokens", "latency/generate_p50_ms")
# in the defaults only when a compared run has it (per-hop coverage: jobs that record hops, docs/multi-step.md)
OPTIONAL_DEFAULTS = ("judge/accuracy", "retrieval/hop/coverage")


@dataclass(frozen=True)
class MinEffect:
    """A metric's practical threshold: the smallest ``|delta|`` worth a verdict, ``max(absolute, relative x
    |baseline value|)`` in the metric's own units. A significant difference below it is "no practical
    difference" (``stats.NEGLIGIBLE``), never better or worse."""

    absolute: float = 0.0
    relative: float = 0.0  # a fraction of the baseline's value (0.2 = 20 %)

    def at(self, baseline_value: float) -> float:
        """The threshold against a baseline of ``baseline_value``."""
        rel = self.relative * abs(baseline_value) if math.isfinite(baseline_value) else 0.0
        return max(self.absolute, rel)

    def describe(self, unit: str = "") -> str:
        """``0.01``, ``max(5 ms, 20% of the baseline)``, ``5% of the baseline``, or ``none``."""
        parts = [f"{self.absolute:g}{unit}"] if self.absolute else []
        parts += [f"{self.relative:.0%} of the baseline"] if self.relative else []
        return "none" if not parts else parts[0] if len(parts) == 1 else f"max({', '.join(parts)})"


# The practical thresholds, per metric family (``metric_family``); ``--min-effect METRIC=VALUE`` overrides one
# metric's. A score or rate in [0, 1] (answer F1, EM, hit@k, MRR, judge accuracy, evidence recall): one point in
# a hundred. Latency: timer noise and a warm cache move a fast stage by milliseconds, so 20 % of the baseline
# and at least 5 ms (the extractive answerer's 0.4 ms vs 1.7 ms is no finding). Amounts (tokens, cost, gain per
# 1k tokens): 5 % of the baseline.
MIN_EFFECTS: Mapping[str, MinEffect] = {
    "score": MinEffect(absolute=0.01),
    "latency": MinEffect(absolute=5.0, relative=0.20),
    "amount": MinEffect(relative=0.05),
}
_AMOUNT_KEYS = ("context/tokens",)
_AMOUNT_SUFFIXES = ("_tokens", "cost_usd")


def metric_family(name: str) -> str:
    """``latency`` (``latency/*``), ``amount`` (token counts, costs, ``*_per_1k_tokens``) or ``score``."""
    if name.startswith("latency/"):
        return "latency"
    if (name in _AMOUNT_KEYS or name.startswith(("tokens/", "cost/")) or name.endswith(_AMOUNT_SUFFIXES)
            or "per_1k_tokens" in name):
        return "amount"
    return "score"


def parse_min_effect(text: str) -> tuple[str, MinEffect]:
    """``METRIC=VALUE`` of ``--min-effect``: VALUE in the metric's units (``answer/f1=0.02``,
    ``latency/generate_p50_ms=10``) or a share of the baseline's value (``context/tokens=10%``); 0 gives every
    significant difference a verdict. ValueError with the fix for anything else."""
    name, sep, value = text.partition("=")
    name, value = name.strip(), value.strip()
    relative = value.endswith("%")
    try:
        x = float(value[:-1] if relative else value)
    except ValueError:
        x = float("nan")
    if not sep or not name or not math.isfinite(x) or x < 0:
        raise ValueError(f"--min-effect {text!r}: use METRIC=VALUE with VALUE >= 0 in the metric's units or as a "
                         "share of the baseline, e.g. --min-effect answer/f1=0.02 or --min-effect context/tokens=10%")
    return name, MinEffect(relative=x / 100) if relative else MinEffect(absolute=x)


@dataclass(frozen=True)
class MetricSpec:
    """A metric as compared: ``name`` is what the user asked for and what the output shows."""

    name: str
    key: str  # the per-case field in cases.jsonl
    statistic: str  # "mean" | "p50" | "p95" (see stats.STATISTICS)
    lower_is_better: bool
    zero_when_failed: bool  # an end-to-end score: a failed or unscored case counts 0 (its declaration's kind)
    successful_only: bool  # latency: only successful cases, as the job's latency percentiles
    min_effect: MinEffect = field(default_factory=MinEffect)  # the practical threshold of a verdict (MIN_EFFECTS)
    min_effect_given: bool = False  # by --min-effect, not MIN_EFFECTS


def with_min_effect(spec: MetricSpec, overrides: Mapping[str, MinEffect]) -> MetricSpec:
    """``spec`` with its ``--min-effect`` override, when one names it."""
    given = overrides.get(spec.name)
    return spec if given is None else replace(spec, min_effect=given, min_effect_given=True)


def per_case_key(name: str) -> str:
    """The per-case field a metric name reads (``latency/<stage>_p50_ms`` reads ``latency/<stage>_ms``)."""
    m = _LATENCY.match(name)
    return f"latency/{m['stage']}_ms" if m else name


def metric_spec(name: str) -> MetricSpec:
    """The spec of a metric name: a per-case key (``answer/f1``, ``retrieval/mrr_at_10``, ``context/tokens``)
    or a latency percentile (``latency/<stage>_p50_ms`` / ``_p95_ms``, ``<stage>`` may be ``total``). Direction
    and failed-case rule are the key's declaration (``ragbench.metric_keys``); an undeclared key is an
    ``UndeclaredMetricError``."""
    threshold = MIN_EFFECTS[metric_family(name)]
    m = _LATENCY.match(name)
    if m:
        return MetricSpec(name=name, key=f"latency/{m['stage']}_ms", statistic=m["stat"], lower_is_better=True,
                          zero_when_failed=False, successful_only=True, min_effect=threshold)
    info = metric_info(name)
    return MetricSpec(name=name, key=name, statistic="mean", lower_is_better=not info.higher_is_better,
                      zero_when_failed=info.kind == "score", successful_only=False, min_effect=threshold)


def default_metrics(available: Iterable[str]) -> list[str]:
    """The default metrics some run has per-case values of (a ``stages=retrieval`` sweep has no answer/f1
    and no generate latency: comparing those would compare zeros, and pick the baseline by them); all of
    them when no run has any, so the comparison says which are missing."""
    have = set(available)
    present = [m for m in DEFAULTS if per_case_key(m) in have]
    return present or [m for m in DEFAULTS if m not in OPTIONAL_DEFAULTS]
