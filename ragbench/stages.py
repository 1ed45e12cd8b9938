"""``stages``: how far a job runs. ``all`` (default) runs every stage; ``retrieval`` stops after
retrieve -> rerank -> expand and the retrieval and context metrics: no generator or judge is built, so
a retriever sweep sends no LLM request; ``encode`` (with ``embedder.shard=i/n``) encodes that slice of the
corpus vectors into the stage cache and stops (``ragbench.embed.shard``): no search, no metric to compare. A
dataset without gold answers runs as ``retrieval`` (``answer_stages``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ragbench.errors import ConfigError, DatasetError
from ragbench.types import Query

if TYPE_CHECKING:
    from ragbench.components import Components

log = logging.getLogger(__name__)

STAGES = ("all", "retrieval", "encode")
ENCODE = "encode"  # its runs are tagged ragbench.stages=encode: the sweep table and compare leave them out


def check_stages(value: Any) -> str:
    """The ``stages`` value, or one line naming the valid ones."""
    text = str(value if value is not None else "all")
    if text not in STAGES:
        raise ConfigError(f"stages={text!r} is not valid; choose one of {', '.join(STAGES)} "
                          "(retrieval: no generator or judge, retrieval and context metrics only; encode: "
                          "embedder.shard=i/n's corpus vectors into the cache, nothing searched)")
    return text


def encode_only(tags: Mapping[str, Any]) -> bool:
    """Whether a run (its MLflow tags) only encoded corpus vectors (``stages=encode``): nothing to compare."""
    return tags.get("ragbench.stages") == ENCODE


def builds_llm(cfg: Mapping[str, Any]) -> bool:
    """True when the job builds its generator and judges (``stages=all``)."""
    return check_stages(cfg.get("stages", "all")) == "all"


def without_gold(queries: Sequence[Query]) -> int:
    """How many answerable questions have no non-blank gold answer (BEIR's; a custom line without ``answers``)."""
    return sum(1 for q in queries if q.answerable and not any(a.strip() for a in q.answers))


def answer_stages(components: Components, queries: Sequence[Query] | None = None) -> Components:
    """The components a job runs on a dataset without gold answers: when no question has one (BEIR, a custom
    set that leaves ``answers`` out), the job scores retrieval only, as ``stages=retrieval`` would, and says so
    in one line (generated answers could not be scored); when only some lack one, the job is refused with the
    fix. Without ``queries`` (before the dataset is read) only the adapter's own ``has_answers`` is read."""
    c = components
    if c.generator is None:
        return c
    name = str(getattr(c.dataset, "name", "dataset"))
    if queries is None:
        if getattr(c.dataset, "has_answers", True):
            return c
    else:
        missing = without_gold(queries)
        answerable = sum(1 for q in queries if q.answerable)
        if not missing:
            return c
        if missing < answerable:
            raise DatasetError(
                f"{missing} of {answerable} answerable questions have no gold answer, so stages=all cannot score "
                "their generated answers", dataset=name, field="answers",
                fix="give every question its answers, or run with stages=retrieval")
    log.warning("%s: the questions have no gold answers: scoring retrieval only, as stages=retrieval (no "
                "generator or judge runs); add stages=retrieval to the command to say so", name)
    return replace(c, generator=None, judges={})
