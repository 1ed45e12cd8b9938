"""What a logged metric key means, declared beside the code that computes it (after lm-evaluation-harness'
``higher_is_better``): its definition and source, its direction, whether a failed case counts 0, and the
sweep-table column or ranking role it supplies.

A module that computes metrics keeps a ``METRICS = {key: MetricInfo(...)}`` table beside its code; a key may
be a pattern (``retrieval/hit_at_<k>``); a ``RetrievalScorer`` declares its keys the same way.
``ragbench.judge.aggregate`` gathers the per-case tables (the job's aggregation reads them) and
``ragbench.metric_keys`` every table of a job and a sweep (``ragbench.compare``, the sweep table and
docs/metrics.md read them). A key no table declares is an error (``UndeclaredMetricError``), never a guess
from its suffix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from ragbench.errors import RagbenchError

KINDS = ("score", "diagnostic")
# a declared name may stand for a family of keys: ``<k>`` is a cut-off (digits or ``topk``), ``<name>`` one
# path part (``retrieval/hit_at_<k>`` declares retrieval/hit_at_1, retrieval/hit_at_10, retrieval/hit_at_topk)
PLACEHOLDERS = {"<k>": r"(?:\d+|topk)", "<name>": r"[^/]+"}
# how the sweep table may rank on a declared key (``Rank.role``), in the order ``auto`` tries them
RANK_ROLES = ("lead", "answer", "fallback")
# the per-group copies of every key (ragbench.judge.aggregate.aggregate): ``by_type/<type>/<key>``
_GROUP = re.compile(r"^by_(?:type|difficulty|tag|turn|followup)/[^/]+/")
SUCCESSFUL = "_successful"  # ``<score>_successful``: the mean over the cases that ran


class UndeclaredMetricError(RagbenchError):
    """A metric key that no ``METRICS`` table declares."""


@dataclass(frozen=True)
class Column:
    """A sweep-table column a declaration supplies: the logged ``key`` (the declared name, or one instance of
    its pattern: ``retrieval/hit_at_topk``), its short terminal ``label``, and its ``order`` (lower first)."""

    key: str
    label: str
    order: int


@dataclass(frozen=True)
class Rank:
    """How the sweep table may rank on a declared key (``role``, one of ``RANK_ROLES``): ``lead`` ranks a sweep
    whose every finished configuration has it (the first such lead by ``order``), ``answer`` ranks it otherwise,
    ``fallback`` ranks a sweep none of whose runs has the chosen metric (a retrieval-only sweep)."""

    key: str
    role: str
    order: int = 0

    def __post_init__(self) -> None:
        if self.role not in RANK_ROLES:
            raise ValueError(f"Rank.role={self.role!r}; choose one of {list(RANK_ROLES)}")


@dataclass(frozen=True)
class MetricInfo:
    """One metric key: its definition, the source it follows and where ragbench differs; ``higher_is_better``;
    ``kind``: ``score`` (end to end, a failed or unscored case counts 0, as every answer score) or
    ``diagnostic`` (the mean over the cases that have it: a rate whose best value is 0 must not be
    improved by a failure counted as 0); ``job_level``: how the job computes a key that is not the mean of a
    per-case value (a count, a percentile, a total); ``unit``: ``count`` (printed as an integer) or "" (a rate,
    a score or an amount); ``columns`` and ``ranks``: the sweep table's use of it."""

    definition: str
    source: str
    differs: str = ""
    higher_is_better: bool = True
    kind: str = "score"
    job_level: str = ""
    unit: str = ""
    columns: tuple[Column, ...] = ()
    ranks: tuple[Rank, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"MetricInfo.kind={self.kind!r}; choose one of {list(KINDS)}")
        if self.kind == "score" and not self.higher_is_better:
            # a failure counted 0 would look like the best value of a lower-is-better score
            raise ValueError("a lower-is-better metric must be kind='diagnostic' (a failed case cannot count 0)")

    @property
    def aggregation(self) -> str:
        """How the job computes its figure: ``job_level``, else the rule of ``kind`` over the per-case values."""
        if self.job_level:
            return self.job_level
        return ("mean over the attempted cases, a failed or unscored case 0" if self.kind == "score"
                else "mean over the cases that have it")


def _pattern(name: str) -> re.Pattern[str]:
    parts = re.split(r"(<k>|<name>)", name)
    return re.compile("".join(PLACEHOLDERS.get(p, re.escape(p)) for p in parts) + r"\Z")


def lookup(tables: Mapping[str, MetricInfo], key: str) -> MetricInfo | None:
    """The declaration of ``key`` in ``tables`` (exact names first, then the ``<k>``/``<name>`` patterns in
    their order)."""
    info = tables.get(key)
    if info is not None:
        return info
    return next((info for name, info in tables.items() if "<" in name and _pattern(name).match(key)), None)


def resolve(tables: Mapping[str, MetricInfo], key: str) -> MetricInfo | None:
    """``lookup`` for a logged key, with the copies the aggregation derives: ``by_type/<type>/<key>`` and
    ``by_difficulty/<level>/<key>`` are ``<key>``; ``<score>_successful`` is the score over the cases that
    ran (a diagnostic: no case counts 0)."""
    key = _GROUP.sub("", key)
    base = lookup(tables, key.removesuffix(SUCCESSFUL)) if key.endswith(SUCCESSFUL) else None
    if base is None:
        return lookup(tables, key)
    if base.kind != "score":  # only a score has a successful-only twin
        return None
    return replace(base, definition=f"{base.definition}; over the cases that ran (failed cases left out)",
                   kind="diagnostic", columns=(), ranks=())


def declared(tables: Mapping[str, MetricInfo], key: str, where: str = "") -> MetricInfo:
    """``resolve``, or a one-line ``UndeclaredMetricError`` naming the key and the fix."""
    info = resolve(tables, key)
    if info is None:
        raise UndeclaredMetricError(
            f"metric {key!r}{f' ({where})' if where else ''} has no declaration; fix: declare it in the METRICS "
            "table beside the code that computes it (ragbench.judge.metric_info.MetricInfo; a retrieval metric "
            "from outside the package: its RetrievalScorer's `metrics`), or name a key listed in docs/metrics.md")
    return info


def merge(*tables: Mapping[str, MetricInfo]) -> dict[str, MetricInfo]:
    """The tables as one; a name declared twice with two meanings is a ValueError (one key, one meaning)."""
    out: dict[str, MetricInfo] = {}
    for table in tables:
        for name, info in table.items():
            if name in out and out[name] != info:
                raise ValueError(f"metric {name!r} is declared twice, differently")
            out[name] = info
    return out


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def markdown_table(tables: Mapping[str, MetricInfo], families: Iterable[tuple[str, str]] = ()) -> str:
    """The declarations as Markdown tables, one row per declared name in declaration order: key, kind,
    direction, how the job computes it, definition (and where ragbench differs), source. ``families``: (name prefix,
    heading) pairs; a row goes under the first whose prefix its name starts with."""
    head = "| key | kind | better | job figure | definition | source |\n|---|---|---|---|---|---|\n"
    groups: dict[str, list[str]] = {}
    order = list(dict.fromkeys(title for _, title in families))
    for name, info in tables.items():
        title = next((t for prefix, t in families if name.startswith(prefix)), "")
        if title not in order:
            order.append(title)
        better = "higher" if info.higher_is_better else "lower"
        text = info.definition + (f". Differs: {info.differs}" if info.differs else "")
        groups.setdefault(title, []).append(
            f"| `{_cell(name)}` | {info.kind} | {better} | {_cell(info.aggregation)} | {_cell(text)} | {_cell(info.source)} |\n")
    parts = []
    for title in order:
        if title in groups:
            parts.append((f"**{title}**\n\n" if title else "") + head + "".join(groups[title]))
    return "\n".join(parts)
