"""The query side's Components fields from the config: ``query.transform``, ``query.k_rrf``, ``trace``,
``routing``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ragbench.query.multistep import multistep_options
from ragbench.query.transforms import NoQueryTransform
from ragbench.routing import parse_routes


def query_options(cfg: DictConfig, instantiate: Callable[[Any], Any]) -> dict[str, Any]:
    """Keyword arguments of ``Components`` for the query group and the trace switch."""
    node = cfg.get("query")
    transform = instantiate(node.transform) if node is not None and node.get("transform") else NoQueryTransform()
    k_rrf = float(node.get("k_rrf", 60)) if node is not None else 60.0
    routing = cfg.get("routing")
    container = OmegaConf.to_container(routing, resolve=True) if routing is not None else None
    routes = parse_routes({str(k): v for k, v in container.items()} if isinstance(container, dict) else None)
    return {"query": transform, "query_k_rrf": k_rrf, "trace": bool(cfg.get("trace", False)), "routes": routes,
            "multistep": multistep_options(cfg)}
