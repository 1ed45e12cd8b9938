"""The query side's Components fields from the config: ``query.transform``, ``query.k_rrf``, ``trace``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig

from ragbench.query.transforms import NoQueryTransform


def query_options(cfg: DictConfig, instantiate: Callable[[Any], Any]) -> dict[str, Any]:
    """Keyword arguments of ``Components`` for the query group and the trace switch."""
    node = cfg.get("query")
    transform = instantiate(node.transform) if node is not None and node.get("transform") else NoQueryTransform()
    k_rrf = float(node.get("k_rrf", 60)) if node is not None else 60.0
    return {"query": transform, "query_k_rrf": k_rrf, "trace": bool(cfg.get("trace", False))}
