"""Where the one cache lives: ``$RAGBENCH_CACHE`` roots the stage records, the LLM replies and the
dataset downloads (``<root>/datasets``). Unset, the job cache is ``.ragbench_cache`` in the current folder
(config.yaml's ``cache.dir``) and downloads go to the user cache folder, shared by every project."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ragbench.errors import ConfigError

ENV_VAR = "RAGBENCH_CACHE"
DEFAULT_DIR = ".ragbench_cache"  # the same default as config.yaml's cache.dir
DOWNLOADS = "datasets"  # the download cache's folder under the root: not a stage, never pruned
# variables an earlier ragbench read: set, they would be ignored without a word, so they stop the job
RETIRED = {"RAGBENCH_STAGE_CACHE": ENV_VAR}


def check_retired(environ: Mapping[str, str] | None = None) -> None:
    """A retired cache variable in the environment is a ConfigError naming the one that replaced it."""
    env = os.environ if environ is None else environ
    for old, new in RETIRED.items():
        if env.get(old):
            raise ConfigError(f"the environment variable {old} was retired: {new} now roots every cache "
                              f"(stage records, LLM replies, downloads); fix: export {new}=\"${old}\" "
                              f"and unset {old}")


def env_root() -> Path | None:
    """``$RAGBENCH_CACHE``, or None when it is unset or empty."""
    value = os.environ.get(ENV_VAR)
    return Path(value).expanduser() if value else None


def job_cache_dir() -> Path:
    """The job cache's folder: ``$RAGBENCH_CACHE``, else ``.ragbench_cache`` (as config.yaml)."""
    return env_root() or Path(DEFAULT_DIR)


def download_root() -> Path:
    """The download cache's root: ``$RAGBENCH_CACHE``, else the user cache folder (``platformdirs``)."""
    root = env_root()
    if root is not None:
        return root
    import platformdirs

    return Path(platformdirs.user_cache_dir("ragbench"))
