"""Environment snapshot tags and the embedding dimension tag, without importing the libraries."""

from __future__ import annotations

import importlib.metadata
import sys

from ragbench.tracking.environment import LIBRARIES, embedder_dim_tag, environment_tags


def test_environment_tags_name_python_os_and_versions() -> None:
    tags = environment_tags()
    assert tags["ragbench.env.python"] == ".".join(map(str, sys.version_info[:3]))
    assert tags["ragbench.env.os"]
    for tag in LIBRARIES.values():
        assert tags[f"ragbench.env.{tag}"]
    assert tags["ragbench.env.mlflow"] == importlib.metadata.version("mlflow")


def test_embedding_dim_tag() -> None:
    assert embedder_dim_tag({"embedding_dim": 384}) == {"ragbench.embedder_dim": "384"}
    assert embedder_dim_tag({"queries": 3}) == {}
