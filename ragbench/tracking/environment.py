"""The environment snapshot of a job (the Benchmark Service's ``config_snapshot``) as run tags: one tag per
entry of the record's environment list (``ragbench.identity.environment``), so the two never disagree."""

from __future__ import annotations

import getpass
from collections.abc import Mapping

from ragbench.identity import environment, git_commit


def environment_tags(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``ragbench.env.<name>`` per entry of ``env`` (default: this process's ``environment()``): python, os,
    ragbench and each library's version (``absent`` when not installed)."""
    return {f"ragbench.env.{name}": value for name, value in (environment() if env is None else env).items()}


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
