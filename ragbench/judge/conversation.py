"""Scores of conversations (docs/conversations.md): the per-turn groups and the per-conversation figures.

Per turn, every metric is reported again for the cases of each turn index, as the question types are:
``by_turn/1/<key>``, ``by_turn/2/<key>``, ``by_turn/3plus/<key>``; where the data marks follow-ups (a turn
tag ``followup``), also ``by_followup/<mark>/<key>`` (turn 1: ``first``; a later turn without the tag:
``unmarked``).

Per conversation, for the keys of ``KEYS`` (each cut-off of ``retrieval/hit_at_<k>`` and, for datasets judged
per document, ``retrieval/doc/hit_at_<k>``; ``answer/f1`` and ``answer/em``): ``conversation/mean/<key>`` is the mean over the conversations of each one's mean over its
turns; ``conversation/all_correct/<key>`` the share of the conversations every turn of which is correct
(its value >= ``CORRECT``); ``conversation/first_fail/<key>`` the mean turn index of the first turn that
is not, over the conversations with one. An answer score counts a failed turn 0 (the end-to-end rule); a
retrieval figure reads the turns that have it (as every retrieval figure: a diagnostic). Skipped turns
(budget) are left out. Everything is computed from the case records, so ``ragbench.verify`` recomputes it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence

from ragbench.metric_info import MetricInfo
from ragbench.types import CaseResult

CORRECT = 0.5  # a turn is correct on a key when its value is at least this (a 0/1 metric: when it is 1)
FOLLOWUP_TAG = "followup"
KEYS = re.compile(r"^(?:retrieval/(?:doc/)?hit_at_\d+|answer/f1|answer/em)$")
_SCORES = ("answer/",)  # end-to-end scores: a failed turn counts 0 (ragbench.judge.aggregate.end_to_end)


def turn_bucket(turn: int) -> str:
    """The ``by_turn`` group of a turn index: ``1``, ``2`` or ``3plus``."""
    return "3plus" if turn >= 3 else str(turn)


def turn_groups(cases: Sequence[CaseResult]) -> list[tuple[str, dict[str, list[CaseResult]]]]:
    """The groups of conversation turns (``by_turn``, and ``by_followup`` when any turn carries the tag),
    as (family, groups) pairs for ``ragbench.judge.aggregate.aggregate``; none without conversations."""
    turns = [c for c in cases if c.query.conversation is not None]
    if not turns:
        return []
    by_turn: dict[str, list[CaseResult]] = defaultdict(list)
    for c in turns:
        by_turn[turn_bucket(c.query.turn)].append(c)
    out = [("by_turn", dict(by_turn))]
    if any(c.query.meta.get(FOLLOWUP_TAG) not in (None, "") for c in turns):
        marks: dict[str, list[CaseResult]] = defaultdict(list)
        for c in turns:
            mark = c.query.meta.get(FOLLOWUP_TAG)
            marks[str(mark) if mark not in (None, "") else "first" if c.query.turn == 1 else "unmarked"].append(c)
        out.append(("by_followup", dict(marks)))
    return out


def _value(case: CaseResult, key: str) -> float | None:
    if key.startswith(_SCORES):
        return 0.0 if case.failed else case.scores.get(key)
    return case.scores.get(key)


def conversation_metrics(cases: Sequence[CaseResult]) -> dict[str, float]:
    """``conversation/*`` over the conversations of ``cases`` (see the module docstring); {} without any."""
    convs: dict[str, list[CaseResult]] = defaultdict(list)
    for c in cases:
        if c.query.conversation is not None and not c.skipped:
            convs[c.query.conversation].append(c)
    if not convs:
        return {}
    out = {"conversation/count": float(len(convs)),
           "conversation/turns_mean": sum(map(len, convs.values())) / len(convs)}
    keys = sorted({k for cs in convs.values() for c in cs for k in c.scores if KEYS.match(k)})
    for key in keys:
        means: list[float] = []
        correct: list[bool] = []
        first: list[int] = []
        for turns in convs.values():
            values = [(c.query.turn, v) for c in sorted(turns, key=lambda c: c.query.turn)
                      if (v := _value(c, key)) is not None]
            if not values:
                continue
            means.append(sum(v for _, v in values) / len(values))
            fails = [t for t, v in values if v < CORRECT]
            correct.append(not fails)
            if fails:
                first.append(fails[0])
        if means:
            out[f"conversation/mean/{key}"] = sum(means) / len(means)
            out[f"conversation/all_correct/{key}"] = sum(correct) / len(correct)
        if first:
            out[f"conversation/first_fail/{key}"] = sum(first) / len(first)
    return out


_SRC = "ragbench (per conversation: docs/conversations.md)"


def _declare(base: str) -> dict[str, MetricInfo]:
    # diagnostics: job-level figures, not means of a per-case value (a failed turn already counts 0 in them)
    kind = "diagnostic"
    return {
        f"conversation/mean/{base}": MetricInfo(
            f"{base} per conversation (the mean over its turns), averaged over the conversations", _SRC, kind=kind,
            job_level="mean over the conversations of each one's mean over its turns"),
        f"conversation/all_correct/{base}": MetricInfo(
            f"share of the conversations every turn of which has {base} >= {CORRECT}", _SRC, kind=kind,
            job_level="conversations with every turn correct / conversations"),
        f"conversation/first_fail/{base}": MetricInfo(
            f"turn index of the first turn with {base} < {CORRECT}, over the conversations with one", _SRC,
            kind="diagnostic", job_level="mean over the conversations with a failing turn"),
    }


METRICS: Mapping[str, MetricInfo] = {
    "conversation/count": MetricInfo("conversations among the job's cases", _SRC, kind="diagnostic",
                                     job_level="a count", unit="count"),
    "conversation/turns_mean": MetricInfo("turns per conversation", _SRC, kind="diagnostic",
                                          job_level="mean over the conversations"),
    **_declare("retrieval/hit_at_<k>"), **_declare("retrieval/doc/hit_at_<k>"), **_declare("answer/f1"),
    **_declare("answer/em"),
}
