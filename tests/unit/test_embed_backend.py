"""``embedder.backend`` / ``embedder.quantize``: the values accepted, the identity (index keys) they make,
and the one-line error without the extra. The vectors themselves: tests/integration/test_onnx_backend.py."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

from ragbench.embed import onnx_backend
from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder
from ragbench.errors import ConfigError, ModelLoadError

TORCH_IDENTITY = ("sentence-transformers:sentence-transformers/all-MiniLM-L6-v2@{rev}|normalize=1|max_seq=None"
                  "|qp=''|dp=''")


def test_torch_keeps_the_identity_of_index_keys_made_before_backends_existed():
    e = SentenceTransformerEmbedder()
    assert e.backend == "auto" and not e.quantize  # auto keeps torch's identity (tests/unit/test_embed_auto.py)
    assert e.identity == TORCH_IDENTITY.format(rev=e._revision)


@pytest.mark.parametrize(("backend", "quantize", "suffix"), [
    ("onnx", False, "|backend=onnx"), ("onnx", True, "|backend=onnx-qint8"),
    ("openvino", False, "|backend=openvino"), ("openvino", True, "|backend=openvino-qint8")])
def test_another_backend_is_part_of_the_identity(backend, quantize, suffix):
    e = SentenceTransformerEmbedder(backend=backend, quantize=quantize)
    assert e.identity == TORCH_IDENTITY.format(rev=e._revision) + suffix
    assert not e.loaded  # nothing exported or loaded at construction


def test_a_bad_backend_or_quantize_without_an_export_is_a_config_error():
    with pytest.raises(ConfigError, match=r"embedder.backend='tensorrt' is not one of auto, torch, onnx, openvino"):
        SentenceTransformerEmbedder(backend="tensorrt")
    with pytest.raises(ConfigError, match=r"embedder.quantize=true needs embedder.backend=onnx"):
        SentenceTransformerEmbedder(quantize=True)


def test_the_default_config_is_auto_and_the_backend_is_a_param():
    with initialize_config_module(config_module="ragbench.conf", version_base="1.3"):
        default = compose(config_name="config")
        onnx = compose(config_name="config", overrides=["embedder.backend=onnx", "embedder.quantize=true"])
    assert default.embedder.backend == "auto" and default.embedder.quantize is False
    assert onnx.embedder.backend == "onnx" and onnx.embedder.quantize is True


def test_a_missing_extra_is_one_line_naming_the_install(monkeypatch):
    # Which extras this venv has must not matter (the README's `.[dev]` install has neither onnx nor
    # onnxruntime): the runtime modules are declared present or missing here, one missing at a time.
    def installed(missing: str):
        return lambda name, *a: None if name == missing else importlib.machinery.ModuleSpec(name, None)

    monkeypatch.setattr(importlib.util, "find_spec", installed("onnxruntime"))
    e = SentenceTransformerEmbedder(backend="onnx")
    with pytest.raises(ModelLoadError) as info:
        e.load()
    assert str(info.value) == ("embedder.backend=onnx needs onnxruntime (the onnx extra); "
                               "fix: pip install -e '.[onnx]'")
    monkeypatch.setattr(importlib.util, "find_spec", installed("openvino"))
    with pytest.raises(ModelLoadError, match=r"^embedder.backend=openvino needs openvino \(the openvino extra\); "
                                             r"fix: pip install -e '.\[openvino\]'$"):
        onnx_backend.require_runtime("openvino")


def test_the_export_key_follows_the_weights_files(tmp_path: Path):
    (tmp_path / "model.safetensors").write_bytes(b"1234")
    before = onnx_backend._source_digest(str(tmp_path))
    (tmp_path / "model.safetensors").write_bytes(b"12345")
    assert onnx_backend._source_digest(str(tmp_path)) != before
    assert onnx_backend._source_digest("org/hub-model") == "org/hub-model"
