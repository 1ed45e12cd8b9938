"""``MetricInfo`` where a metric's code (and a user's package) has always imported it; defined in the leaf
module ``ragbench.metric_info``, so that any layer (budget, evidence, cache) can declare its keys."""

from __future__ import annotations

from ragbench.metric_info import (
    KINDS,
    PLACEHOLDERS,
    RANK_ROLES,
    Column,
    MetricInfo,
    Rank,
    UndeclaredMetricError,
    declared,
    lookup,
    markdown_table,
    merge,
    resolve,
)

__all__ = ["KINDS", "PLACEHOLDERS", "RANK_ROLES", "Column", "MetricInfo", "Rank", "UndeclaredMetricError",
           "declared", "lookup", "markdown_table", "merge", "resolve"]
