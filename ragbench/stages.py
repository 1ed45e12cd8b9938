"""``stages``: how far a job runs. ``all`` (default) runs every stage; ``retrieval`` stops after
retrieve -> rerank -> expand and the retrieval and context metrics: no generator or judge is built, so
a retriever sweep sends no LLM request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragbench.errors import ConfigError

STAGES = ("all", "retrieval")


def check_stages(value: Any) -> str:
    """The ``stages`` value, or one line naming the valid ones."""
    text = str(value if value is not None else "all")
    if text not in STAGES:
        raise ConfigError(f"stages={text!r} is not valid; choose one of {', '.join(STAGES)} "
                          "(retrieval: no generator or judge, retrieval and context metrics only)")
    return text


def builds_llm(cfg: Mapping[str, Any]) -> bool:
    """True when the job builds its generator and judges (``stages=all``)."""
    return check_stages(cfg.get("stages", "all")) == "all"
