"""ragbench: sweep RAG pipelines with Hydra, log every job to MLflow."""

import os

from omegaconf import OmegaConf

from ragbench.scopes import default_scope

__version__ = "0.1.0"

# `${default_scope:${oc.select:dataset._target_,null}}`: retrieval.scope follows the protocol the dataset
# adapter declares (its class attribute default_scope).
OmegaConf.register_new_resolver("default_scope", default_scope, replace=True)

# `${sweep_id:}` in hydra.sweep.dir: the sweeping process's id, resolved once and carried to launcher
# workers with the config (like `${now:}`), so two sweeps started in the same second get their own folders.
OmegaConf.register_new_resolver("sweep_id", lambda: str(os.getpid()), use_cache=True, replace=True)
