"""The judges of a job from the ``judge`` group: each node of ``judge.judges`` plus the group's judge-wide
keys (``judge.model``, ``judge.repeats``... at the top of ``conf/judge/llm.yaml``, so they work from the
command line) for the judges whose class takes them. Each value is in the config once: logged once,
hashed once, and not mirrored into ``judges.llm`` through ``${judge.X}``."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig

from ragbench.errors import ConfigError
from ragbench.llm.endpoint import SETTINGS, LLMEndpoint
from ragbench.llm.local import local_model

GROUP = "judges"
BACKENDS = ("litellm", "local")


def _params(target: str) -> tuple[set[str], bool]:
    """The keyword parameters ``target`` names, and whether it also takes any (``**kwargs``)."""
    from hydra.utils import get_object

    params = inspect.signature(get_object(target)).parameters.values()
    return {p.name for p in params}, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def build_judges(node: DictConfig, instantiate: Callable[..., Any]) -> dict[str, Any]:
    """``{name: judge}``; a judge-wide key that no judge takes is a ConfigError naming it. The
    judge-wide endpoint keys (``judge.model``, ``judge.timeout``...) make one ``LLMEndpoint``, built once
    and given to every judge that takes an ``endpoint``; a judge's own node may set some over it (the
    claim judge's ``max_tokens``)."""
    wide = {str(k): node[k] for k in node if k != GROUP}
    backend = str(wide.pop("backend", None) or "litellm")
    if backend not in BACKENDS:
        raise ConfigError(f"judge.backend={backend!r} is not valid; choose {' or '.join(BACKENDS)} (a model "
                          "ragbench runs itself: docs/local-models.md)")
    if backend == "local" and "model" in wide:
        wide["model"] = local_model(wide["model"])
    shared = {k: wide[k] for k in SETTINGS if k in wide}
    endpoint: LLMEndpoint | None = None
    judges: dict[str, Any] = {}
    used: set[str] = set()
    for name, spec in (node.get(GROUP) or {}).items():
        named, takes_any = _params(str(spec["_target_"]))
        if "endpoint" not in named:
            given = {k: v for k, v in wide.items() if (k in named or takes_any) and k not in spec}
            used.update(given)
            judges[str(name)] = instantiate(spec, **given)
            continue
        # a judge taking an endpoint: its other keyword settings are endpoint settings (its node's own)
        given = {k: v for k, v in wide.items() if k in named and k not in shared and k not in spec}
        used.update(given, shared)
        endpoint = endpoint or (LLMEndpoint.of("judge", None, shared) if shared else None)
        # Hydra reads a dataclass passed to instantiate as config: the endpoint goes to the built partial
        judges[str(name)] = instantiate(spec, _partial_=True, **given)(endpoint=endpoint)
    unused = sorted(set(wide) - used)
    if unused and judges:
        raise ConfigError(f"judge.{unused[0]} is not a setting of any chosen judge ({', '.join(judges)}); "
                          "fix: remove it, or add the judge that takes it (e.g. judge=[lexical,llm])")
    return judges
