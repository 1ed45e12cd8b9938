"""What a logged metric key means, declared beside the code that computes it (after lm-evaluation-harness'
``higher_is_better``): its definition and source, its direction, and whether a failed case counts 0.

A module that computes metrics keeps a ``METRICS = {key: MetricInfo(...)}`` table beside its code
(``ragbench.judge.reference_free``, ``ragbench.judge.claims``); ``ragbench.judge.aggregate.metric_info``
looks a key up there, and ``ragbench.compare`` and the job's aggregation read the declaration instead of
guessing from the key's suffix.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("score", "diagnostic")


@dataclass(frozen=True)
class MetricInfo:
    """One metric key: its definition, the source it follows and where ragbench differs; ``higher_is_better``;
    ``kind``: ``score`` (end to end, a failed or unscored case counts 0, as every answer score) or
    ``diagnostic`` (the mean over the cases that have it: a rate whose best value is 0 must not be
    improved by a failure counted as 0)."""

    definition: str
    source: str
    differs: str = ""
    higher_is_better: bool = True
    kind: str = "score"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"MetricInfo.kind={self.kind!r}; choose one of {list(KINDS)}")
        if self.kind == "score" and not self.higher_is_better:
            # a failure counted 0 would look like the best value of a lower-is-better score
            raise ValueError("a lower-is-better metric must be kind='diagnostic' (a failed case cannot count 0)")
