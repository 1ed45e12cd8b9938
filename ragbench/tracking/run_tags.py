"""The tags and params a job's run gets from its config and components before the pipeline runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ragbench.llm.local import is_local
from ragbench.llm.pricing import TAG, CostBasis, cost_basis, has_price
from ragbench.protocols import LoggedParams, LoggedTags, PromptedGenerator, PromptedJudge, RemoteEmbedder
from ragbench.query.transforms import LLMTransform
from ragbench.routing import routing_tag

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from ragbench.components import Components


def start_tags(cfg: DictConfig, components: Components) -> dict[str, str]:
    """The run's tags known before the pipeline runs: models, stages, routing, cost basis (the environment is
    the record's ``versions``, which the sink logs as tags: ``ragbench.tracking.mlflow_sink.mlflow_tags``)."""
    return {
        "ragbench.generator": components.generator.identity if components.generator else "none",
        "ragbench.stages": str(cfg.get("stages", "all")),
        "ragbench.embedder": components.embedder.identity if components.embedder else "none",
        **component_tags(components), **routing_tag(components.routes, components.router.routing if components.router else None),
        **cost_tag(components),
    }


def called_models(components: Components) -> tuple[list[str], int]:
    """(litellm model strings, local models) of the models a job calls: the generator, the model judges, an
    LLM query transform and an embedding API; a model ragbench runs itself (``local``, ``local/<ref>``:
    ``llm=local``, ``judge.backend=local``) or a component declaring ``cost_basis = "local"`` counts as local."""
    models: list[str] = []
    local = 0
    for part in (components.generator, *components.judges.values(), components.query, components.embedder):
        if isinstance(part, CostBasis) and part.cost_basis == "local":
            local += 1
            continue
        if isinstance(part, PromptedGenerator) or isinstance(part, PromptedJudge) or isinstance(
                part, RemoteEmbedder):
            model = part.model
        elif isinstance(part, LLMTransform):
            model = str(part.client.model)
        else:
            continue
        if is_local(model):
            local += 1
        else:
            models.append(model)
    return models, local


def cost_tag(components: Components, price: Callable[[str], bool] | None = None) -> dict[str, str]:
    """``ragbench.cost_basis`` (``ragbench.llm.pricing``): priced, unpriced, local or none; ``price``: whether a
    model has a price (default: litellm's offline cost map, imported only when some model is called)."""
    models, local = called_models(components)
    return {TAG: cost_basis(models, local=local, price=price or has_price)}


def _logged(components: Components) -> list[Any]:
    return [components.generator, *components.judges.values()]


def component_params(components: Components) -> dict[str, Any]:
    """What the config does not show: prompt and rubric file hashes of the generator and judges."""
    out: dict[str, Any] = {}
    for comp in _logged(components):
        if isinstance(comp, LoggedParams):
            out.update(comp.log_params())
    return out


def component_tags(components: Components) -> dict[str, str]:
    """Run tags the generator and judges add (``LoggedTags``)."""
    out: dict[str, str] = {}
    for comp in _logged(components):
        if isinstance(comp, LoggedTags):
            out.update({str(k): str(v) for k, v in comp.log_tags().items()})
    return out
