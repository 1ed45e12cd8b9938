"""APIEmbedder: embeddings from any litellm embedding model (OpenAI, an OpenAI-compatible server, ...)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragbench.embed.shard import parse_shard
from ragbench.errors import ConfigError
from ragbench.llm.endpoint import LLMEndpoint

log = logging.getLogger(__name__)


class APIEmbedder:
    """Satisfies ``ragbench.protocols.Embedder``: batched ``litellm.embedding`` calls, L2-normalised float32.

    ``identity`` names the model, its dimensions and prefixes (it enters every index key). ``dim`` is
    ``dimensions`` when given, else learnt from one probe call on first use.
    """

    def __init__(
        self,
        *,
        endpoint: LLMEndpoint | None = None,
        batch_size: int = 64,
        dimensions: int | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
        shard: str | None = None,
        **settings: Any,
    ) -> None:
        """``endpoint`` with ``settings`` (``embedder.model``, ``api_base``, ``api_key_env``, ``timeout``,
        ``num_retries``, ``backoff_s``: ragbench.llm.endpoint) over it; one request at a time."""
        if batch_size < 1:
            raise ConfigError(f"embedder.batch_size must be >= 1, got {batch_size}")
        if dimensions is not None and dimensions < 1:
            raise ConfigError(f"embedder.dimensions must be >= 1 or null, got {dimensions}")
        endpoint = LLMEndpoint.of("embedder", endpoint, {**settings, "max_concurrency": 1}, max_tokens=None)
        self.model = str(endpoint.model)
        self.batch_size = batch_size
        self.dimensions = dimensions
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.shard = parse_shard(shard)  # stages=encode: the slice of the corpus to encode (never in identity)
        self.client = endpoint.client()
        self._dim = dimensions
        self._lock = threading.Lock()

    def preflight(self) -> None:
        """One tiny embedding request before the job's work (see ``LLMClient.preflight``)."""
        self.client.preflight(kind="embedding")

    @property
    def identity(self) -> str:
        return (
            f"litellm:{self.model}|dims={self.dimensions}|normalize=1"
            f"|qp={self.query_prefix!r}|dp={self.document_prefix!r}"
        )

    @property
    def dim(self) -> int:
        with self._lock:
            if self._dim is None:
                self._dim = int(self._encode(["dimension probe"], "").shape[1])
            return self._dim

    def _encode(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        rows: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [prefix + t for t in texts[start : start + self.batch_size]]
            result = self.client.embed(batch, dimensions=self.dimensions)
            rows.append(np.asarray(result.vectors, dtype=np.float32))
            log.debug("embedded %d/%d texts with %s", start + len(batch), len(texts), self.model)
        vecs = np.concatenate(rows, axis=0)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return np.ascontiguousarray(vecs / np.where(norms == 0, 1.0, norms), dtype=np.float32)

    def _checked(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self._encode(texts, prefix)
        with self._lock:
            if self._dim is None:
                self._dim = int(vecs.shape[1])
            expected = self._dim
        if vecs.shape[1] != expected:
            raise ConfigError(
                f"embedder.model {self.model!r} returned {vecs.shape[1]}-d vectors, expected "
                f"{expected}\n  fix: set embedder.dimensions to the model's size or null"
            )
        return vecs

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of chunk texts."""
        return self._checked(texts, self.document_prefix)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of query texts."""
        return self._checked(texts, self.query_prefix)
