"""ragbench: sweep RAG pipelines with Hydra, log every job to MLflow."""

import os

from omegaconf import OmegaConf

__version__ = "0.1.0"

# `${llm_cache:${cache.mode}}`: the LLM response cache follows the stage cache's mode (as llm.use_cache):
# read_write -> true (use and fill); read_only -> "read_only" (use, never write); refresh and off -> false
# (bypassed: never a stale answer after "refresh").
OmegaConf.register_new_resolver(
    "llm_cache", lambda mode: {"read_write": True, "read_only": "read_only"}.get(str(mode), False), replace=True
)



def _default_scope(dataset: str | None) -> str:
    from ragbench.retrieval.scope import default_scope

    return default_scope(dataset)


# `${default_scope:${dataset.name}}`: retrieval.scope follows the dataset's official protocol by default.
OmegaConf.register_new_resolver("default_scope", _default_scope, replace=True)

# `${sweep_id:}` in hydra.sweep.dir: the sweeping process's id, resolved once and carried to launcher
# workers with the config (like `${now:}`), so two sweeps started in the same second get their own folders.
OmegaConf.register_new_resolver("sweep_id", lambda: str(os.getpid()), use_cache=True, replace=True)
