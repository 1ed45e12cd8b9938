"""The embedder's ONNX and OpenVINO backends: the transformer exported once to ONNX (int8-quantised on
request), cached with the tokenizer and the pooling it needs, and run by ONNX Runtime or OpenVINO without
torch (ragbench.embed.onnx_encoder).

Why not ``SentenceTransformer(..., backend="onnx")``: that path needs ``optimum-onnx``, whose every
release pins ``transformers<4.58``, while sentence-transformers 6 needs ``transformers>=5`` (the two do not
install together; ``optimum-intel[openvino]`` likewise pins ``transformers<5.6`` and a CUDA torch). So the
export is ``torch.onnx.export`` of the same module and the int8 model is ONNX Runtime's
``quantize_dynamic`` (QInt8 weights, per tensor: what ``export_dynamic_quantized_onnx_model(...,
"avx512_vnni")`` asks optimum for), all local and offline.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any

from ragbench.cache.files import MANIFEST, json_sha256, payload_hashes
from ragbench.cache.lock import DEFAULT_TIMEOUT_S, hold
from ragbench.cache.root import download_root
from ragbench.embed.onnx_encoder import OnnxEncoder, save_layout
from ragbench.errors import ConfigError, ModelLoadError

log = logging.getLogger(__name__)

BACKENDS = ("auto", "torch", "onnx", "openvino")
STAGE = "onnx_models"  # <cache root>/onnx_models/<key>/: a cache entry (manifest + content hashes)
EXPORT_VERSION = 2  # bump when the export recipe changes: every cached export is then redone (2: + the
# tokenizer and layout files ragbench.embed.onnx_encoder runs from)
OPSET = 17
FLOAT_FILE = "model.onnx"
QINT8_FILE = "model_qint8.onnx"
EXTRA_FIX = "pip install -e '.[onnx]'"


def check_backend(backend: str, quantize: bool) -> None:
    """ConfigError for an unknown ``embedder.backend`` or ``embedder.quantize`` without an ONNX model."""
    if backend not in BACKENDS:
        raise ConfigError(f"embedder.backend={backend!r} is not one of {', '.join(BACKENDS)}")
    if quantize and backend in ("torch", "auto"):
        raise ConfigError("embedder.quantize=true needs embedder.backend=onnx or openvino (it quantises the "
                          "exported ONNX model); fix: add embedder.backend=onnx")


def require_runtime(backend: str) -> None:
    """ModelLoadError, one line, when the packages a backend needs are not installed."""
    modules = ["onnx", "onnxruntime"] + (["openvino"] if backend == "openvino" else [])
    extra = "openvino" if backend == "openvino" else "onnx"
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ModelLoadError(f"embedder.backend={backend} needs {', '.join(missing)} (the {extra} extra); "
                             f"fix: pip install -e '.[{extra}]'")


def _source_digest(source: str) -> Any:
    """What identifies the weights: a local folder's file names, sizes and mtimes; a hub name as is."""
    folder = Path(source)
    if not folder.is_dir():
        return source
    return sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in folder.rglob("*") if p.is_file())


def export_key(source: str, revision: str, quantize: bool) -> str:
    """The cache key of one export: weights, recipe, and the versions that shape the ONNX graph (read from the
    installed packages' metadata, the strings ``torch.__version__`` and ``transformers.__version__`` hold:
    importing torch for them cost a warm job that runs the export, never torch, about 2 CPU-s)."""
    return json_sha256({"stage": STAGE, "v": EXPORT_VERSION, "source": source, "weights": _source_digest(source),
                        "revision": revision, "quantize": bool(quantize), "opset": OPSET,
                        "torch": version("torch"), "transformers": version("transformers")}, ascii=True)


def _export(source: str, folder: Path, quantize: bool) -> str:
    """Exports the transformer of ``source`` to ``folder``; the name of the file to run."""
    import torch
    from sentence_transformers import SentenceTransformer

    # a fresh copy: torch.onnx.export leaves the module it traced unusable for eager inference
    st: Any = SentenceTransformer(source, device="cpu")
    save_layout(st, folder)
    module = st[0]
    model = module.model.eval()
    names = list(module.tokenizer.model_input_names)
    sample = module.tokenizer(["an example sentence", "a second, longer example sentence"], padding=True,
                              return_tensors="pt")

    class _Traced(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.inner(**dict(zip(names, inputs, strict=True))).last_hidden_state

    axes = {n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]}
    # the tracer warns about shape-dependent Python branches in transformers' mask code: the graph is
    # checked against torch by tests/integration/test_onnx_backend.py, so the warnings only add noise
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_Traced(), tuple(sample[n] for n in names), str(folder / FLOAT_FILE), input_names=names,
                          output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    if not quantize:
        return FLOAT_FILE
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(folder / FLOAT_FILE), str(folder / QINT8_FILE), weight_type=QuantType.QInt8,
                     per_channel=False, reduce_range=False)
    (folder / FLOAT_FILE).unlink()
    return QINT8_FILE


def exported_model(source: str, revision: str, *, quantize: bool, root: Path | None = None) -> Path:
    """The cached ONNX file of ``source``; exported (under a lock, into a temp folder renamed into place)
    the first time any job asks for it."""
    key = export_key(source, revision, quantize)
    stage_dir = (root or download_root()) / STAGE
    target = stage_dir / key
    name = QINT8_FILE if quantize else FLOAT_FILE
    if (target / name).exists():
        return target / name
    try:
        stage_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelLoadError(f"cannot write the ONNX export of {source!r} to {stage_dir}: {exc}; "
                             f"fix: make it writable or point $RAGBENCH_CACHE elsewhere") from exc
    with hold(stage_dir / f"{key}.lock", timeout_s=DEFAULT_TIMEOUT_S, what=f"exporting {source} to ONNX"):
        if (target / name).exists():
            return target / name
        start = time.monotonic()
        tmp = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=stage_dir))
        tmp.chmod(0o755)  # mkdtemp makes it private; the export is shared like any cache entry
        try:
            try:
                _export(source, tmp, quantize)
            except (RuntimeError, ValueError, TypeError) as exc:  # what torch.onnx / onnxruntime raise
                raise ModelLoadError(f"cannot export {source!r} to ONNX: {str(exc).splitlines()[0] if str(exc) else exc!r}; "
                                     f"fix: use embedder.backend=torch for this model") from exc
            manifest = {"stage": STAGE, "key": key, "source": source, "revision": revision, "quantize": quantize,
                        "opset": OPSET, "created": time.time(), "content_sha256": payload_hashes(tmp)}
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))
            os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        log.info("exported %s to ONNX%s in %.1f s: %s", source, " (int8)" if quantize else "",
                 time.monotonic() - start, target / name)
    return target / name


def runner(path: Path, backend: str, threads: int | None = None):  # noqa: ANN201 - onnxruntime / openvino
    """feeds -> last_hidden_state (numpy) through ONNX Runtime, or OpenVINO reading the same ONNX file;
    ``threads``: ONNX Runtime's intra-op threads (None: one per core)."""
    if backend == "openvino":
        import openvino

        # f32: on CPUs with bf16 units OpenVINO would otherwise run the float model in bf16 (1e-3 off torch)
        compiled = openvino.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        out = compiled.output(0)
        return lambda feeds: compiled(feeds)[out]
    import onnxruntime

    # no spin-waiting between batches: the same vectors bit for bit, and on a shared machine (2 busy
    # cores, 600 texts) 15.7 CPU-s instead of 18.7-19.6 at equal or better wall time (issue 46)
    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return lambda feeds: session.run(None, feeds)[0]


def encoder(path: Path, backend: str, max_seq_length: int | None = None, threads: int | None = None) -> OnnxEncoder:
    """The exported model at ``path`` as a BatchEncoder, run by ``backend`` (onnx or openvino), torch-free."""
    return OnnxEncoder(path.parent, runner(path, backend, threads), max_seq_length)
