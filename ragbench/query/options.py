"""The query side's Components fields from the config: ``query.transform``, ``query.k_rrf``, ``trace``,
``routing`` (the gold-type routes, and the router when routing changes what is searched)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ragbench.query.multistep import multistep_options
from ragbench.query.routed import build_router
from ragbench.query.transforms import NoQueryTransform
from ragbench.routing import parse_routing


def query_options(cfg: DictConfig, instantiate: Callable[[Any], Any]) -> dict[str, Any]:
    """Keyword arguments of ``Components`` for the query group and the trace switch."""
    node = cfg.get("query")
    transform = instantiate(node.transform) if node is not None and node.get("transform") else NoQueryTransform()
    k_rrf = float(node.get("k_rrf", 60)) if node is not None else 60.0
    given = cfg.get("routing")
    container = OmegaConf.to_container(given, resolve=True) if given is not None else None
    routing_node = {str(k): v for k, v in container.items()} if isinstance(container, dict) else {}
    routing = parse_routing(routing_node)
    client = routing_node.get("client")
    return {"query": transform, "query_k_rrf": k_rrf, "trace": bool(cfg.get("trace", False)),
            "routes": routing.by_type, "router": build_router(routing, client if isinstance(client, dict) else None),
            "multistep": multistep_options(cfg)}
