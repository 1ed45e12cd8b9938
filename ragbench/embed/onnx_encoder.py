"""The exported sentence-transformers model run without torch: the model's own tokenizer (``tokenizers``), one
ONNX Runtime or OpenVINO session, and sentence-transformers' pooling and normalisation in numpy.

Why: importing sentence-transformers (and with it torch) cost a job that encodes about 5.5 CPU-s and 500 MB
of memory, for a model that then ran on ONNX Runtime anyway (docs/embedders.md). The export writes what
the run needs beside ``model.onnx`` (``save_layout``): the tokenizer exactly as sentence-transformers loaded
it (its lower-casing included) and the layout of the modules around the transformer. Only the common layout
runs here (Transformer, then Pooling by mean, CLS or max, then an optional Normalize); any other model says
why it cannot (``Layout.why``), and ``embedder.backend=auto`` keeps torch for it. ``auto`` also compares
these vectors with torch's on its probe texts before it runs them (ragbench.embed.auto).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragbench.errors import ModelLoadError

LAYOUT_FILE = "encoder.json"
TOKENIZER_FILE = "tokenizer.json"
POOLINGS = ("mean", "cls", "max")


@dataclass(frozen=True)
class Layout:
    """What sentence-transformers does around the exported transformer; ``why`` is '' when this module can
    run it, else the reason it cannot."""

    pooling: str
    max_seq_length: int
    dim: int
    input_names: tuple[str, ...]
    why: str = ""


def describe(st: Any) -> Layout:
    """The layout of a loaded SentenceTransformer (read at export time)."""
    modules = [type(m).__name__ for m in st]
    tokenizer = getattr(st[0], "tokenizer", None)
    pooler = st[1] if len(modules) > 1 else None
    # sentence-transformers 6: ``pooling_mode``, ``embedding_dimension``; 5: ``get_pooling_mode_str()``,
    # ``pooling_output_dimension``
    mode = str(getattr(pooler, "pooling_mode", None) or getattr(pooler, "get_pooling_mode_str", lambda: "")())
    pooling = {"mean_tokens": "mean", "cls_token": "cls", "max_tokens": "max"}.get(mode, mode)
    dim = getattr(pooler, "embedding_dimension", None) or getattr(pooler, "pooling_output_dimension", 0)
    why = ""
    if modules[:2] != ["Transformer", "Pooling"] or modules[2:] not in ([], ["Normalize"]):
        why = f"its modules are {' -> '.join(modules)}, not Transformer -> Pooling [-> Normalize]"
    elif pooling not in POOLINGS:
        why = f"its pooling is {pooling!r}, not one of {', '.join(POOLINGS)}"
    elif st.max_seq_length is None:
        why = "it has no max_seq_length"
    elif getattr(tokenizer, "backend_tokenizer", None) is None:
        why = "its tokenizer is not a fast one (the tokenizers package)"
    return Layout(pooling=pooling, max_seq_length=int(st.max_seq_length or 0), dim=int(dim or 0),
                  input_names=tuple(getattr(tokenizer, "model_input_names", ())), why=why)


def save_layout(st: Any, folder: Path) -> None:
    """Writes the tokenizer as sentence-transformers configured it and the layout, beside the export."""
    layout = describe(st)
    if not layout.why:
        st[0].tokenizer.backend_tokenizer.save(str(folder / TOKENIZER_FILE))
    (folder / LAYOUT_FILE).write_text(json.dumps(asdict(layout), indent=2, sort_keys=True))


def read_layout(folder: Path) -> Layout:
    """The layout saved beside an export; ModelLoadError when it is missing or unreadable."""
    try:
        data = json.loads((folder / LAYOUT_FILE).read_text(encoding="utf-8"))
        return Layout(pooling=str(data["pooling"]), max_seq_length=int(data["max_seq_length"]), dim=int(data["dim"]),
                      input_names=tuple(data["input_names"]), why=str(data.get("why", "")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelLoadError(f"the ONNX export in {folder} has no readable {LAYOUT_FILE} ({exc}); "
                             f"fix: python -m ragbench.cache reset, then run again (the export is redone)") from exc


def pool(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """sentence-transformers' Pooling of a padded batch ``hidden`` [n, L, d] under ``mask`` [n, L], then L2
    normalisation (eps 1e-12, as torch.nn.functional.normalize), as rows of ``hidden``'s float type."""
    if mode == "cls":
        out = hidden[:, 0]
    elif mode == "max":
        out = np.where(mask[:, :, None] > 0, hidden, hidden.dtype.type(-1e9)).max(axis=1)
    else:
        weights = mask[:, :, None].astype(hidden.dtype)
        out = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.ascontiguousarray(out / np.maximum(norms, 1e-12), dtype=hidden.dtype)


class OnnxEncoder:
    """Encodes batches through ``run`` (feeds -> last_hidden_state: ragbench.embed.onnx_backend.runner). Satisfies
    ragbench.embed.batches.BatchEncoder."""

    def __init__(self, folder: Path, run: Callable[[dict[str, np.ndarray]], np.ndarray],
                 max_seq_length: int | None = None) -> None:
        from tokenizers import Tokenizer

        self.layout = read_layout(folder)
        if self.layout.why:
            raise ModelLoadError(f"the exported model cannot run without sentence-transformers: {self.layout.why}; "
                                 "fix: embedder.backend=torch")
        self.tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=int(max_seq_length or self.layout.max_seq_length))
        self.run = run

    @property
    def dim(self) -> int:
        return self.layout.dim

    def lengths(self, texts: Sequence[str]) -> list[int]:
        """Each text's number of tokens, special tokens included, after truncation."""
        return [len(e.ids) for e in self.tokenizer.encode_batch(list(texts))]

    def _feeds(self, encodings: Sequence[Any]) -> dict[str, np.ndarray]:
        width = max(len(e.ids) for e in encodings)
        feeds = {name: np.zeros((len(encodings), width), dtype=np.int64)
                 for name in ("input_ids", "attention_mask", "token_type_ids")}
        for row, e in enumerate(encodings):
            n = len(e.ids)
            feeds["input_ids"][row, :n] = e.ids
            feeds["attention_mask"][row, :n] = e.attention_mask
            feeds["token_type_ids"][row, :n] = e.type_ids
        return {name: feeds[name] for name in self.layout.input_names}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One batch, padded to its longest text: normalised float32 vectors, one row per text."""
        feeds = self._feeds(self.tokenizer.encode_batch(list(texts)))
        mask = feeds.get("attention_mask")
        if mask is None:
            mask = (feeds["input_ids"] != 0).astype(np.int64)
        return pool(np.asarray(self.run(feeds), dtype=np.float32), mask, self.layout.pooling)

    def tokens(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One text alone (no padding): its last layer's token rows, which rows are special tokens, and its
        pooled, normalised vector, pooled in float64 (the semantic judge's vectors, which ``ragbench.verify``
        recomputes to 1e-9, have always been pooled so)."""
        enc = self.tokenizer.encode(text)
        hidden = np.asarray(self.run(self._feeds([enc])), dtype=np.float32)
        pooled = pool(hidden.astype(np.float64), np.ones(hidden.shape[:2], np.int64), self.layout.pooling)
        return hidden[0], np.array(enc.special_tokens_mask, dtype=bool), pooled[0]
