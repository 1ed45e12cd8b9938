"""The environment snapshot of a job (the Benchmark Service's ``config_snapshot``): Python, OS and the
versions of the libraries that shape results, as run tags. Versions come from package metadata, so
nothing heavy is imported; a library that is not installed is tagged ``absent``."""

from __future__ import annotations

import getpass
import importlib.metadata
import platform

from ragbench.identity import git_commit

# distribution names, as pip knows them -> the tag suffix
LIBRARIES = {"torch": "torch", "sentence-transformers": "sentence_transformers", "faiss-cpu": "faiss",
             "bm25s": "bm25s", "litellm": "litellm", "mlflow": "mlflow", "hydra-core": "hydra",
             "numpy": "numpy"}
FAISS_DISTRIBUTIONS = ("faiss-cpu", "faiss-gpu", "faiss")


def _version(dist: str) -> str:
    names = FAISS_DISTRIBUTIONS if dist == "faiss-cpu" else (dist,)
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "absent"


def environment_tags() -> dict[str, str]:
    """``ragbench.env.python``, ``ragbench.env.os`` and ``ragbench.env.<library>`` version tags."""
    tags = {"ragbench.env.python": platform.python_version(),
            "ragbench.env.os": f"{platform.system()} {platform.release()} ({platform.machine()})"}
    tags.update({f"ragbench.env.{tag}": _version(dist) for dist, tag in LIBRARIES.items()})
    return tags


def embedder_dim_tag(counts: dict[str, int] | object) -> dict[str, str]:
    """``ragbench.embedder_dim``, beside ``ragbench.embedder``: the width of the vectors the job used
    (``counts["embedding_dim"]``, read off the vectors, so a cached index needs no model)."""
    dim = counts.get("embedding_dim") if isinstance(counts, dict) else None
    return {"ragbench.embedder_dim": str(dim)} if dim else {}


def source_tags() -> dict[str, str]:
    """MLflow's own source tags, which its UI shows in the run list and the run page."""
    commit = git_commit()
    tags = {"mlflow.source.type": "LOCAL", "mlflow.source.name": "python -m ragbench"}
    if commit != "unknown":
        tags["mlflow.source.git.commit"] = commit.removesuffix("+dirty")
    try:
        tags["mlflow.user"] = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        pass
    return tags
