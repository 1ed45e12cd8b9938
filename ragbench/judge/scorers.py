"""Retrieval metrics added from outside the package (``RetrievalScorer``, ``metrics.retrieval`` in the config):
checked once when built, applied to each case's ranking, and rebuilt by ``ragbench.verify`` from the run's
params so it recomputes them from the case record like every built-in retrieval metric."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import yaml

from ragbench.errors import ConfigError
from ragbench.metric_info import MetricInfo, lookup
from ragbench.protocols import RetrievalScorer

CONFIG_KEY = "metrics.retrieval"  # a list of {_target_: ...} nodes; optional, absent = none
PREFIX = "retrieval/"
# What a run's key from a scorer means where the scorer is not at hand (compare, the sweep table read the logged
# keys, not the config): every scorer key is a higher-is-better diagnostic (``check_scorer``), so this one
# declaration holds for all of them. ``ragbench.metric_keys`` tries it after every built-in declaration.
METRICS = {
    f"{PREFIX}<name>": MetricInfo("a retrieval metric of a RetrievalScorer from outside the package (metrics.retrieval); "
                                  "its definition is the scorer's own `metrics` declaration",
                                  "the scorer's `metrics`", kind="diagnostic"),
}


def check_scorer(scorer: object, where: str) -> RetrievalScorer:
    """``scorer`` if it is a ``RetrievalScorer`` whose declared keys are ``retrieval/*`` diagnostics, else a
    one-line ConfigError naming the fix."""
    if not isinstance(scorer, RetrievalScorer):
        raise ConfigError(f"{where} ({type(scorer).__name__}) is not a RetrievalScorer; fix: give it a `metrics` "
                          "mapping of key -> MetricInfo and a score(*, ranked, covered, qrels, chunk_qrels, ks) method")
    for key, info in scorer.metrics.items():
        if (not isinstance(info, MetricInfo) or not str(key).startswith(PREFIX) or "/" in str(key)[len(PREFIX):]
                or info.kind != "diagnostic" or not info.higher_is_better):
            raise ConfigError(f"{where} declares {key!r}; fix: declare each key as 'retrieval/<name>' with "
                              "MetricInfo(..., kind='diagnostic') and higher_is_better=True (a retrieval figure "
                              "averages the queries that have it, and compare reads it as higher is better)")
    return scorer


def build_scorers(nodes: Sequence[Any] | None, instantiate: Callable[[Any], Any]) -> tuple[RetrievalScorer, ...]:
    """The scorers of ``metrics.retrieval``, each checked."""
    return tuple(check_scorer(instantiate(node), f"{CONFIG_KEY}[{i}]") for i, node in enumerate(nodes or ()))


def scorer_scores(scorers: Sequence[RetrievalScorer], *, ranked: Sequence[str], covered: Sequence[Sequence[str]],
                  qrels: Mapping[str, int], chunk_qrels: Mapping[str, int], ks: Sequence[int]) -> dict[str, float]:
    """Every scorer's keys for one query; a key a scorer did not declare is a ConfigError (never logged unread)."""
    out: dict[str, float] = {}
    for scorer in scorers:
        got = scorer.score(ranked=list(ranked), covered=[list(c) for c in covered], qrels=dict(qrels),
                           chunk_qrels=dict(chunk_qrels), ks=list(ks))
        for key, value in got.items():
            if lookup(scorer.metrics, key) is None:
                raise ConfigError(f"{type(scorer).__name__} returned {key!r}, which its `metrics` does not "
                                  "declare; fix: add it to `metrics`")
            out[key] = float(value)
    return out


def scorer_nodes(params: Mapping[str, str]) -> list[dict[str, Any]]:
    """The ``metrics.retrieval`` nodes of a run, rebuilt from its flattened params
    (``metrics.retrieval.<i>.<field>``, values read back as YAML scalars)."""
    head = f"{CONFIG_KEY}."
    nodes: dict[int, dict[str, Any]] = {}
    for name, value in params.items():
        if not name.startswith(head):
            continue
        index, _, path = name[len(head):].partition(".")
        if not index.isdigit() or not path:
            continue
        node = nodes.setdefault(int(index), {})
        *parents, leaf = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(value) if isinstance(value, str) else value
    return [nodes[i] for i in sorted(nodes)]
