"""ragbench: sweep RAG pipelines with Hydra, log every job to MLflow."""

import os

from omegaconf import OmegaConf

from ragbench.exported import exported_topk
from ragbench.scopes import default_scope

__version__ = "0.1.0"

# `${default_scope:${oc.select:dataset._target_,null}}`: retrieval.scope follows the protocol the dataset
# adapter declares (its class attribute default_scope).
OmegaConf.register_new_resolver("default_scope", default_scope, replace=True)

# `${exported_topk:${oc.select:system.path,null},5}` in conf/retrieval/system.yaml: system=responses of a file
# written by `python -m ragbench.export --responses` reads back at its run's top-k.
OmegaConf.register_new_resolver("exported_topk", exported_topk, use_cache=True, replace=True)

# `${sweep_id:}` in hydra.sweep.dir: the sweeping process's id, resolved once and carried to launcher
# workers with the config (like `${now:}`), so two sweeps started in the same second get their own folders.
OmegaConf.register_new_resolver("sweep_id", lambda: str(os.getpid()), use_cache=True, replace=True)
