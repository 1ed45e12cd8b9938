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
from ragbench.llm.local import local_model

GROUP = "judges"
BACKENDS = ("litellm", "local")


def _accepted(target: str) -> set[str] | None:
    """The keyword parameters ``target`` takes, or None when it takes any (``**kwargs``)."""
    from hydra.utils import get_object

    params = inspect.signature(get_object(target)).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params}


def build_judges(node: DictConfig, instantiate: Callable[..., Any]) -> dict[str, Any]:
    """``{name: judge}``; a judge-wide key that no judge takes is a ConfigError naming it."""
    wide = {str(k): node[k] for k in node if k != GROUP}
    backend = str(wide.pop("backend", None) or "litellm")
    if backend not in BACKENDS:
        raise ConfigError(f"judge.backend={backend!r} is not valid; choose {' or '.join(BACKENDS)} (a model "
                          "ragbench runs itself: docs/local-models.md)")
    if backend == "local" and "model" in wide:
        wide["model"] = local_model(wide["model"])
    judges: dict[str, Any] = {}
    used: set[str] = set()
    for name, spec in (node.get(GROUP) or {}).items():
        accepted = _accepted(str(spec["_target_"]))
        given = {k: v for k, v in wide.items() if (accepted is None or k in accepted) and k not in spec}
        used.update(given)
        judges[str(name)] = instantiate(spec, **given)
    unused = sorted(set(wide) - used)
    if unused and judges:
        raise ConfigError(f"judge.{unused[0]} is not a setting of any chosen judge ({', '.join(judges)}); "
                          "fix: remove it, or add the judge that takes it (e.g. judge=[lexical,llm])")
    return judges
