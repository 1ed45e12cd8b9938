"""The tags and params a job's run gets from its config and components before the pipeline runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from ragbench.components import Components


def start_tags(cfg: DictConfig, components: Components) -> dict[str, str]:
    """The run's tags known before the pipeline runs: models, stages, environment, routing."""
    from ragbench.routing import routing_tag
    from ragbench.tracking.environment import environment_tags

    return {
        "ragbench.generator": components.generator.identity if components.generator else "none",
        "ragbench.stages": str(cfg.get("stages", "all")),
        "ragbench.embedder": components.embedder.identity if components.embedder else "none",
        **component_tags(components), **environment_tags(), **routing_tag(components.routes),
    }


def _logged(components: Components) -> list[Any]:
    return [components.generator, *components.judges.values()]


def component_params(components: Components) -> dict[str, Any]:
    """What the config does not show: prompt and rubric file hashes of the generator and judges."""
    from ragbench.protocols import LoggedParams

    out: dict[str, Any] = {}
    for comp in _logged(components):
        if isinstance(comp, LoggedParams):
            out.update(comp.log_params())
    return out


def component_tags(components: Components) -> dict[str, str]:
    """Run tags the generator and judges add (``LoggedTags``)."""
    from ragbench.protocols import LoggedTags

    out: dict[str, str] = {}
    for comp in _logged(components):
        if isinstance(comp, LoggedTags):
            out.update({str(k): str(v) for k, v in comp.log_tags().items()})
    return out
