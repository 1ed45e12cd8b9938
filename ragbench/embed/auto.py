"""``embedder.backend=auto`` (the default): the fastest installed backend whose vectors equal torch's.

The candidates, fastest first (benchmarks/bench_backend.py: 2.5x and 1.9x less encoder CPU than torch
on busy cores, 1.10x and 1.05x on idle ones: docs/embedders.md), are OpenVINO and ONNX Runtime running
the model's exported ONNX file. A candidate is taken when, on a fixed probe set (``PROBE``: short and
long texts, truncation and padding included), every one of its vectors has cosine >= ``MIN_COSINE``
to torch's. The verdict is measured once per (weights, export recipe, runtime version, max_seq_length)
and kept as a small JSON file under the download cache's root (``$RAGBENCH_CACHE``, else the user
cache folder) in ``backend_checks/``; a candidate that fails, or that cannot be exported, leaves torch.
The choice and its reason become the run's ``ragbench.embedder_backend`` tag (``backend_tag``).

Identity: ``auto`` keeps torch's embedder identity (so its vectors share index keys with torch's, and every
cache made before ``auto`` existed still matches). Why that is right: the key never promised bit-identical
vectors (torch's own float32 sums differ in the last bits across CPUs, instruction sets and thread counts,
and no key names those), only the same model's vectors to float precision; auto never runs a backend
whose vectors are further than that from torch's. docs/embedders.md has the measured differences.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragbench.cache.files import json_sha256
from ragbench.cache.root import download_root
from ragbench.embed.batches import TorchEncoder
from ragbench.embed.onnx_backend import encoder, export_key, exported_model
from ragbench.errors import RagbenchError
from ragbench.gc_tuning import long_lived

log = logging.getLogger(__name__)

AUTO = "auto"
TAG = "ragbench.embedder_backend"
MIN_COSINE = 0.99999  # per vector, against torch's on the probe set
CANDIDATES = ("openvino", "onnx")  # fastest first; torch is the fallback
RUNTIMES = {"onnx": ("onnxruntime", "onnx"), "openvino": ("openvino", "onnx")}
STAGE = "backend_checks"  # <download root>/backend_checks/<key>.json: one verdict per file
CHECK_VERSION = 2  # bump when the probe or the rule changes: every verdict is then measured again (2: the
# exported model runs without sentence-transformers, so its tokenizer and pooling are checked too)

# Short and long, plain and odd texts: one batch mixes lengths (padding) and the last two exceed the
# model's 256 word pieces (truncation), so the check covers what encoding a corpus does.
PROBE: tuple[str, ...] = (
    "What did Caroline research?",
    "When did Melanie paint a sunrise?",
    "a",
    "The quick brown fox jumps over the lazy dog.",
    "Retrieval-augmented generation combines a retriever with a language model.",
    "Table 3: F1 scores on the test set (mean ± std over 5 seeds).",
    "Ünïcödé, emoji 🙂, CJK 漢字 and digits 1234567890 in one line.",
    "def encode(texts): return model.encode(texts, normalize_embeddings=True)",
    "   leading and trailing spaces   ",
    "Q: How many questions does the Qasper sample hold? A: it depends on the variant.",
    "The revenue for fiscal year 2022 was $4.2 billion, up 12% from the prior year.",
    "She said she'd go to the support group on 7 May 2023, after the LGBTQ conference.",
    " ".join(["The committee reviewed the proposal and asked for further evidence."] * 8),
    " ".join(f"word{i}" for i in range(400)),
    " ".join(["Long documents are truncated to the model's maximum sequence length."] * 40),
)


@dataclass(frozen=True)
class Choice:
    """The backend auto runs and why; ``exported``: the ONNX file it runs (None for torch)."""

    backend: str
    reason: str
    exported: Path | None = None

    @property
    def tag(self) -> str:
        return f"{self.backend}: {self.reason}"


def missing_runtime(backend: str) -> list[str]:
    """The modules ``backend`` needs that are not installed."""
    return [m for m in RUNTIMES[backend] if importlib.util.find_spec(m) is None]


def runtime_version(backend: str) -> str:
    dist = RUNTIMES[backend][0]
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def check_key(export: str, backend: str, max_seq_length: int | None) -> str:
    """The key of one verdict: the export (weights, recipe, torch/transformers versions), the runtime and
    its version, the sequence length and the rule."""
    return json_sha256({"stage": STAGE, "v": CHECK_VERSION, "export": export, "backend": backend,
                        "runtime": runtime_version(backend), "max_seq_length": max_seq_length,
                        "min_cosine": MIN_COSINE, "probe": list(PROBE)}, ascii=True)


def read_verdict(folder: Path, key: str) -> dict[str, Any] | None:
    """A stored verdict, or None (absent or unreadable: measured again)."""
    try:
        data = json.loads((folder / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("min_cosine"), float) else None


def write_verdict(folder: Path, key: str, verdict: dict[str, Any]) -> None:
    """Written to a temporary file renamed into place; an unwritable cache only costs a re-check."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:12]}-", suffix=".json", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(verdict, f, indent=2, sort_keys=True)
        os.replace(tmp, folder / f"{key}.json")
    except OSError as exc:
        log.warning("cannot keep the embedder backend check in %s: %s", folder, exc)


def min_cosine(source: str, exported: Path, backend: str, max_seq_length: int | None) -> float:
    """The smallest cosine between torch's vector and ``backend``'s of each probe text, both encoded as one
    batch: the exported model as jobs run it (its own tokenizer, pooling and normalisation, no torch:
    ragbench.embed.onnx_encoder), against sentence-transformers on torch."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    with long_lived():
        st = SentenceTransformer(source, device="cpu")
    if max_seq_length:
        st.max_seq_length = max_seq_length
    ref = TorchEncoder(st).encode(PROBE)
    got = encoder(exported, backend, max_seq_length).encode(PROBE)
    return float(np.min(np.sum(np.asarray(ref, np.float64) * np.asarray(got, np.float64), axis=1)))


Measure = Callable[[str, Path, str, int | None], float]
Export = Callable[[str, str], Path]


def _export(source: str, revision: str) -> Path:
    return exported_model(source, revision, quantize=False)


def _export_key(source: str, revision: str) -> str:
    return export_key(source, revision, False)


def choose(source: str, revision: str, *, device: str | None, max_seq_length: int | None,
           root: Path | None = None, export: Export = _export, measure: Measure = min_cosine,
           export_id: Callable[[str, str], str] = _export_key,
           say: Callable[[str], None] | None = None) -> Choice:
    """The backend ``auto`` runs for this model: the first candidate installed whose stored (else measured
    now) verdict passes, else torch. ``say``: one line per step taken (``prepare``'s progress)."""
    if device not in (None, "cpu"):
        return Choice("torch", f"device={device}: the exported backends run on the CPU only")
    folder = (root or download_root()) / STAGE
    why: list[str] = []
    for backend in CANDIDATES:
        missing = missing_runtime(backend)
        if missing:
            why.append(f"{backend}: {', '.join(missing)} not installed")
            continue
        try:
            key = check_key(export_id(source, revision), backend, max_seq_length)
            verdict = read_verdict(folder, key)
            if say is not None:
                say(f"{backend}: the ONNX export (made once per model, then cached)")
            path = export(source, revision)
            if verdict is None:
                if say is not None:
                    say(f"{backend}: its vectors against torch's on {len(PROBE)} probe texts")
                start = time.monotonic()
                verdict = {"backend": backend, "min_cosine": measure(source, path, backend, max_seq_length),
                           "rule": f"cosine >= {MIN_COSINE}", "probe_texts": len(PROBE), "source": source,
                           "revision": revision, "runtime": runtime_version(backend), "created": time.time()}
                write_verdict(folder, key, verdict)
                log.info("embedder backend check: %s min cosine %.8f to torch in %.1f s", backend,
                         verdict["min_cosine"], time.monotonic() - start)
        except (RagbenchError, OSError, RuntimeError, ValueError, ImportError) as exc:
            first = (str(exc).splitlines()[0] if str(exc) else type(exc).__name__).split("; fix:")[0]
            log.warning("embedder.backend=auto: %s not used: %s", backend, first)
            why.append(f"{backend} failed: {first[:120]}")
            continue
        cosine = float(verdict["min_cosine"])
        if cosine >= MIN_COSINE:
            return Choice(backend, f"{RUNTIMES[backend][0]} {runtime_version(backend)}, min cosine to torch "
                                   f"{cosine:.7f} >= {MIN_COSINE} ({len(PROBE)} texts)", path)
        why.append(f"{backend} min cosine to torch {cosine:.7f} < {MIN_COSINE}")
    return Choice("torch", "; ".join(why) or "no faster backend")


def backend_tag(embedder: object) -> dict[str, str]:
    """``ragbench.embedder_backend``: the backend a sentence-transformers embedder ran and why ({} for an
    embedder without backends, an API model say)."""
    label = getattr(embedder, "backend_choice", None)
    return {TAG: label} if isinstance(label, str) else {}
