"""What a compared metric is: its per-case key, its statistic, its direction, how a failed case counts."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ragbench.judge.aggregate import is_score, metric_info

_LATENCY = re.compile(r"^latency/(?P<stage>[a-z_]+)_(?P<stat>p50|p95)_ms$")
# per-case costs: lower is better (``context/evidence_recall_per_1k_tokens`` is a gain, not a cost)
_COSTS = ("context/tokens", "prompt_tokens", "completion_tokens")
_COST_PREFIXES = ("latency/", "tokens/", "cost/")
_COST_SUFFIXES = ("_tokens", "cost_usd", "judge_failed")

DEFAULTS = ("answer/f1", "judge/accuracy", "retrieval/hit_at_5", "retrieval/mrr_at_10", "context/tokens",
            "latency/generate_p50_ms")
OPTIONAL_DEFAULTS = ("judge/accuracy",)  # in the defaults only when a compared run has it


@dataclass(frozen=True)
class MetricSpec:
    """A metric as compared: ``name`` is what the user asked for and what the output shows."""

    name: str
    key: str  # the per-case field in cases.jsonl
    statistic: str  # "mean" | "p50" | "p95" (see stats.STATISTICS)
    lower_is_better: bool
    zero_when_failed: bool  # an end-to-end score: a failed or unscored case counts 0 (aggregate.is_score)
    successful_only: bool  # latency: only successful cases, as the job's latency percentiles


def metric_spec(name: str) -> MetricSpec:
    """The spec of a metric name: a per-case key (``answer/f1``, ``retrieval/mrr_at_10``, ``context/tokens``)
    or a latency percentile (``latency/<stage>_p50_ms`` / ``_p95_ms``, ``<stage>`` may be ``total``)."""
    m = _LATENCY.match(name)
    if m:
        return MetricSpec(name=name, key=f"latency/{m['stage']}_ms", statistic=m["stat"], lower_is_better=True,
                          zero_when_failed=False, successful_only=True)
    info = metric_info(name)  # a declared key (judge/claims/*, judge/rf/*): its declaration, not its suffix
    cost = (not info.higher_is_better if info is not None else
            name in _COSTS or name.startswith(_COST_PREFIXES)
            or (name.endswith(_COST_SUFFIXES) and not name.endswith("per_1k_tokens")))
    return MetricSpec(name=name, key=name, statistic="mean", lower_is_better=cost, zero_when_failed=is_score(name) and not cost,
                      successful_only=False)


def default_metrics(available: Iterable[str]) -> list[str]:
    """The default metrics some run has per-case values of (a ``stages=retrieval`` sweep has no answer/f1
    and no generate latency: comparing those would compare zeros, and pick the baseline by them); all of
    them when no run has any, so the comparison says which are missing."""
    have = set(available)
    present = [m for m in DEFAULTS if metric_spec(m).key in have]
    return present or [m for m in DEFAULTS if m not in OPTIONAL_DEFAULTS]
