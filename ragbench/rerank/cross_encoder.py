"""Cross-encoder reranking with sentence-transformers' CrossEncoder, loaded lazily on first use."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragbench.errors import ModelLoadError
from ragbench.gc_tuning import long_lived
from ragbench.rerank.fallback import OnLoadError
from ragbench.types import ChunkTree, Hit, Query
from ragbench.validate import integer
from ragbench.weights import package_weights

log = logging.getLogger(__name__)


def resolve_model_path(model: str, package: str | None) -> str:
    """Where to load weights from: see ``ragbench.weights.package_weights``."""
    return package_weights(model, package, role="reranker")[0]


class CrossEncoderReranker(OnLoadError):
    """Scores (query, chunk text) pairs with a cross-encoder and reorders the hits by that score; weights
    that cannot load fail the job up front, or with ``on_load_error="fallback"`` skip the reranker."""

    needs_vectors = False
    needs_votes = False

    def __init__(
        self,
        *,
        model: str = "cross-encoder/ms-marco-MiniLM-L6-v2",
        package: str | None = None,
        batch_size: int = 32,
        max_length: int | None = 512,
        device: str | None = None,
        on_load_error: str = "fail",
    ) -> None:
        self.set_on_load_error("reranker.rerankers.cross_encoder.on_load_error", on_load_error)
        batch_size = integer("reranker.rerankers.cross_encoder.batch_size", batch_size, lo=1)
        self.model = model
        self.package = package
        self.batch_size = int(batch_size)
        self.max_length = max_length
        self.device = device
        self._encoder: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._encoder is None:
                path = resolve_model_path(self.model, self.package)
                try:
                    with long_lived():
                        from sentence_transformers import CrossEncoder

                        self._encoder = CrossEncoder(path, device=self.device, max_length=self.max_length)
                except (OSError, ValueError) as err:
                    raise ModelLoadError(
                        f"could not load cross-encoder '{path}' (reranker.rerankers.cross_encoder.model): "
                        f"{' '.join(str(err).split())}; "
                        "fix: with no internet, point `model` to a local folder or set `package` to a pip "
                        "package shipping the weights"
                    ) from err
                log.info("loaded cross-encoder %s on %s", path, self._encoder.device)
        return self._encoder

    def score(self, query_text: str, texts: Sequence[str]) -> np.ndarray:
        """One relevance score per text for ``query_text`` (higher is better)."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        self.skipped_check()
        encoder = self._load()
        scores = encoder.predict(
            [(query_text, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False
        )
        out = np.asarray(scores, dtype=np.float32)
        if out.size != len(texts):
            raise ModelLoadError(
                f"cross-encoder '{self.model}' returns {out.shape[-1]} scores per pair; a reranking "
                "cross-encoder has one output label; fix: choose a reranking model (num_labels=1)"
            )
        return out.reshape(len(texts))

    def rerank(
        self,
        query: Query,
        hits: Sequence[Hit],
        *,
        tree: ChunkTree,
        k: int,
        query_vector: np.ndarray | None = None,
        chunk_vectors: Mapping[str, np.ndarray] | None = None,
    ) -> list[Hit]:
        """The best ``k`` hits by cross-encoder score (retrieval order breaks ties)."""
        if not hits or k < 1:
            return []
        scores = self.score(query.text, [tree[h.chunk_id].text for h in hits])
        order = sorted(range(len(hits)), key=lambda i: -float(scores[i]))  # stable
        return [
            Hit(chunk_id=hits[i].chunk_id, score=float(scores[i]), rank=r)
            for r, i in enumerate(order[:k], start=1)
        ]
