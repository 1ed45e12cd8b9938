"""Environment snapshot tags and the embedding dimension tag, without importing the libraries."""

from __future__ import annotations

import importlib.metadata
import sys

from ragbench.identity import LIBRARIES, environment
from ragbench.record import begun
from ragbench.tracking.environment import embedder_dim_tag, environment_tags


def test_environment_tags_name_python_os_and_versions() -> None:
    tags = environment_tags()
    assert tags["ragbench.env.python"] == ".".join(map(str, sys.version_info[:3]))
    assert tags["ragbench.env.os"]
    for tag in LIBRARIES.values():
        assert tags[f"ragbench.env.{tag}"]
    assert tags["ragbench.env.mlflow"] == importlib.metadata.version("mlflow")


def test_the_record_and_the_tags_hold_one_environment_list(monkeypatch) -> None:
    """Once the record had transformers and not python, litellm, bm25s or hydra, and the tags the reverse."""
    from ragbench import __version__

    monkeypatch.setattr("ragbench.identity.git_commit", lambda: "abc")  # no git process in the unit suite

    env = environment()
    assert {"python", "os", "ragbench", "transformers", "litellm", "bm25s", "hydra", "torch"} <= set(env)
    assert env["ragbench"] == __version__ and env["transformers"] == importlib.metadata.version("transformers")
    record = begun("x", {}, lambda cfg: "h")
    assert dict(record.versions) == env
    assert environment_tags() == {f"ragbench.env.{k}": v for k, v in record.versions.items()}
    env["python"] = "changed"  # a copy: the caller cannot change the process's list
    assert environment()["python"] != "changed"


def test_embedding_dim_tag() -> None:
    assert embedder_dim_tag({"embedding_dim": 384}) == {"ragbench.embedder_dim": "384"}
    assert embedder_dim_tag({"queries": 3}) == {}
