"""The one lazy ``import litellm`` (~5 s): offline cost map, no debug banners, no telemetry."""

from __future__ import annotations

import logging
import os
import threading
from types import ModuleType

from ragbench.gc_tuning import long_lived

_lock = threading.Lock()
_module: ModuleType | None = None


def litellm() -> ModuleType:
    """The configured litellm module, imported on first use only."""
    global _module
    if _module is None:
        with _lock:
            if _module is None:
                # Else litellm fetches its cost map from GitHub at import (and waits on retries offline).
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                with long_lived():  # ~5 s of import whose objects stay for the whole process
                    import litellm as lib

                lib.suppress_debug_info = True  # no "Give Feedback / Get Help" banners on stdout
                lib.telemetry = False
                lib.num_retries = None  # ragbench.llm.retry retries; litellm must not retry again
                if not os.environ.get("LITELLM_LOG"):
                    # litellm logs one INFO line per call: keep its warnings, drop the chatter.
                    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
                        logging.getLogger(name).setLevel(logging.WARNING)
                _module = lib
    return _module
