"""The offline-safe environment of every ragbench command: defaults set before a library that could call
out of the machine (Hugging Face, litellm, MLflow, Ray) is imported; a variable the user set wins. A leaf
(it imports nothing of ragbench), so any entry point can call it first."""

from __future__ import annotations

import os
import sys

# Nothing may call out of the machine by default; users override these in their environment.
DEFAULTS = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "TOKENIZERS_PARALLELISM": "false",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",  # a progress bar per artifact copy is noise in a sweep log
    # on a tracking server MLflow prints "View run ... at" per run it ends: the sweep prints its own URL last
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}
# off a terminal (CI logs, pipes) tqdm bars are \r-joined noise: no bars at all
NO_TERMINAL = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def set_defaults() -> None:
    """Sets each of ``DEFAULTS`` (and ``NO_TERMINAL`` when stderr is not a terminal) the user has not set."""
    for key, value in {**DEFAULTS, **({} if sys.stderr.isatty() else NO_TERMINAL)}.items():
        os.environ.setdefault(key, value)
