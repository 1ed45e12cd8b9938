"""ragbench: sweep RAG pipelines with Hydra, log every job to MLflow."""

import os

from omegaconf import OmegaConf

__version__ = "0.1.0"

# `${llm_cache:${cache.mode}}`: the LLM response cache follows the stage cache's mode, so
# cache.mode=refresh or off also bypasses cached model replies (never a stale answer after "refresh").
OmegaConf.register_new_resolver(
    "llm_cache", lambda mode: str(mode) in ("read_write", "read_only"), replace=True
)

# `${sweep_id:}` in hydra.sweep.dir: the sweeping process's id, resolved once and carried to launcher
# workers with the config (like `${now:}`), so two sweeps started in the same second get their own folders.
OmegaConf.register_new_resolver("sweep_id", lambda: str(os.getpid()), use_cache=True, replace=True)
