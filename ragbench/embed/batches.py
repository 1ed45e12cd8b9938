"""How the embedder feeds a model: texts in batches of similar token length, each batch to a ``BatchEncoder``
(torch's sentence-transformers here, the exported model in ragbench.embed.onnx_encoder).

Why batches by token length: a batch pads every text to its longest, and a transformer's work grows with the
padded length. sentence-transformers sorts by characters, which groups texts of unequal token counts (digits,
names and punctuation split into many word pieces): on the full LoCoMo file (17,447 short texts) that padded
320,771 token positions for 247,599 real ones, and token order pads 248,899, 23% less work for the same
vectors (padding is masked out; docs/embedders.md has the measurement).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np


class BatchEncoder(Protocol):
    """A loaded embedding model: token counts, one batch's normalised vectors, one text's token rows."""

    @property
    def dim(self) -> int: ...

    def lengths(self, texts: Sequence[str]) -> list[int]: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def tokens(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


def by_length(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Row numbers in batches of ``batch_size``, longest first; equal lengths keep their order, so the same
    texts always make the same batches."""
    order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]


class TorchEncoder:
    """A SentenceTransformer (torch) as a BatchEncoder; ``st`` the model itself."""

    def __init__(self, st: Any) -> None:
        self.st = st

    @property
    def dim(self) -> int:
        getter = getattr(self.st, "get_embedding_dimension", None) or self.st.get_sentence_embedding_dimension
        return int(getter())

    def lengths(self, texts: Sequence[str]) -> list[int]:
        ids = self.st.tokenizer(list(texts), truncation=True, max_length=self.st.max_seq_length,
                                return_attention_mask=False, return_token_type_ids=False)["input_ids"]
        return [len(row) for row in ids]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.st.encode(list(texts), batch_size=len(texts), normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)

    def tokens(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        out = self.st.encode([text], output_value=None, show_progress_bar=False)[0]
        rows = out["token_embeddings"].detach().cpu().numpy()
        ids = out["input_ids"].detach().cpu().numpy()[:len(rows)]
        tok = self.st.tokenizer
        special = {t for t in (tok.cls_token_id, tok.sep_token_id) if t is not None}
        return rows, np.array([int(i) in special for i in ids], dtype=bool), \
            out["sentence_embedding"].detach().cpu().numpy()
