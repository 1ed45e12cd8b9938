"""A job's identity: its resolved config minus where results go, the code version, and the content of the
files it reads as input. Two runs with one identity compute the same thing (resume reuses the first). And
what ran it: the commit (``git_commit``) and the environment's versions (``environment``)."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragbench import __version__
from ragbench.cache.store import make_key

# what a job's identity leaves out: where results go and how the run is steered, not what it computes
NOT_IDENTITY = ("tracking", "cache", "resume", "objective", "max_failure_rate", "budget", "plan")
# files whose content is a job's input (recorded answers, an outside ranking): a rewritten file at the same
# path is another job, so resume never shows the figures of the file's earlier content
INPUT_FILES = (("system", "path"), ("retrieval", "path"))
# the environment's libraries: distribution name, as pip knows it -> its name in the environment
# (``environment``: the record's ``versions`` and the run's ``ragbench.env.<name>`` tags)
LIBRARIES = {"torch": "torch", "transformers": "transformers",
             "sentence-transformers": "sentence_transformers", "faiss-cpu": "faiss", "bm25s": "bm25s",
             "litellm": "litellm", "mlflow": "mlflow", "hydra-core": "hydra", "numpy": "numpy"}
FAISS_DISTRIBUTIONS = ("faiss-cpu", "faiss-gpu", "faiss")


def job_hash(resolved: Mapping[str, Any]) -> str:
    """Identity of a job: its resolved config minus where results go, plus the code version."""
    config = {k: v for k, v in resolved.items() if k not in NOT_IDENTITY}
    return make_key({"config": config, "ragbench": __version__, "commit": git_commit(),
                     "inputs": input_fingerprints(resolved)})


def input_fingerprints(resolved: Mapping[str, Any]) -> dict[str, str]:
    """SHA-256 of each file named by an ``INPUT_FILES`` key of the resolved config (absent files: none)."""
    out: dict[str, str] = {}
    for group, key in INPUT_FILES:
        section = resolved.get(group)
        path = section.get(key) if isinstance(section, Mapping) else None
        if not path or not Path(str(path)).is_file():
            continue
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        out[f"{group}.{key}"] = digest.hexdigest()
    return out


@functools.lru_cache(maxsize=1)
def git_commit() -> str:
    """The commit ragbench runs from (``unknown`` outside a git checkout), ``+dirty`` when modified."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha + ("+dirty" if dirty else "")


def environment() -> dict[str, str]:
    """The one environment list of a run: Python, the OS, ragbench and each of ``LIBRARIES`` (``absent``
    when not installed), read from package metadata (nothing heavy is imported). The record keeps it as
    ``versions``; MLflow shows it as the ``ragbench.env.<name>`` tags (``ragbench.tracking.environment``)."""
    return dict(_environment())


@functools.lru_cache(maxsize=1)
def _environment() -> tuple[tuple[str, str], ...]:
    env = {"python": platform.python_version(),
           "os": f"{platform.system()} {platform.release()} ({platform.machine()})", "ragbench": __version__}
    env.update({name: _version(dist) for dist, name in LIBRARIES.items()})
    return tuple(env.items())


def _version(dist: str) -> str:
    for name in FAISS_DISTRIBUTIONS if dist == "faiss-cpu" else (dist,):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "absent"
