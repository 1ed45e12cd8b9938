"""What a logged metric key means, declared beside the code that computes it (after lm-evaluation-harness'
``higher_is_better``): its definition and source, its direction, and whether a failed case counts 0.

A module that computes metrics keeps a ``METRICS = {key: MetricInfo(...)}`` table beside its code
(``ragbench.judge.retrieval``, ``squad``, ``locomo_f1``, ``refusal``, ``reference_free``, ``claims``; a key may
be a pattern, ``retrieval/hit_at_<k>``); a ``RetrievalScorer`` declares its keys the same way;
``ragbench.judge.aggregate.metric_info``
looks a key up there, and ``ragbench.compare`` and the job's aggregation read the declaration instead of
guessing from the key's suffix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

KINDS = ("score", "diagnostic")
# a declared name may stand for a family of keys: ``<k>`` is a cut-off (digits or ``topk``), ``<name>`` one
# path part (``retrieval/hit_at_<k>`` declares retrieval/hit_at_1, retrieval/hit_at_10, retrieval/hit_at_topk)
PLACEHOLDERS = {"<k>": r"(?:\d+|topk)", "<name>": r"[^/]+"}


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

    @property
    def aggregation(self) -> str:
        """How the job turns the per-case values into its figure (the rule of ``kind``)."""
        return ("mean over the attempted cases, a failed or unscored case counting 0" if self.kind == "score"
                else "mean over the cases that have a value")


def _pattern(name: str) -> re.Pattern[str]:
    parts = re.split(r"(<k>|<name>)", name)
    return re.compile("".join(PLACEHOLDERS.get(p, re.escape(p)) for p in parts) + r"\Z")


def lookup(tables: Mapping[str, MetricInfo], key: str) -> MetricInfo | None:
    """The declaration of ``key`` in ``tables`` (exact names first, then the ``<k>``/``<name>`` patterns)."""
    info = tables.get(key)
    if info is not None:
        return info
    return next((info for name, info in tables.items() if "<" in name and _pattern(name).match(key)), None)
