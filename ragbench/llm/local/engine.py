"""A local model loaded once per process (keyed by weights, device and dtype) and a batch generated with it.

transformers reads a GGUF file with ``gguf`` (weights dequantised to ``dtype``) or a model folder; the
model's own chat template builds the prompt and its own tokenizer counts the tokens. A batch is left-padded
(decoder-only models generate after the prompt's last token) and decoded greedily unless a temperature is
set; a graded verdict's batch is one forward pass choosing among the allowed tokens (``choose``). One batch
at a time per model (a lock): two threads would only contend for the same cores.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragbench import session
from ragbench.errors import ConfigError, ModelLoadError
from ragbench.llm.local.grammar import Graded, Plan, pick, plan
from ragbench.llm.local.source import EXTRA, ModelSource, check_memory, inspect_weights

log = logging.getLogger(__name__)
DTYPES = ("auto", "float32", "float16", "bfloat16")
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class Generated:
    """One request's reply: its text and token counts (prompt, completion up to the end-of-turn token)."""

    text: str
    prompt_tokens: int
    completion_tokens: int


def _torch(role: str) -> Any:
    """torch, transformers, gguf and accelerate, or one line naming the extra."""
    missing = [
        m for m in ("torch", "transformers", "gguf", "accelerate") if importlib.util.find_spec(m) is None
    ]
    if missing:
        raise ConfigError(f"{role}=local needs {', '.join(missing)}, not installed; fix: {EXTRA}")
    import torch

    return torch


def pick_device(device: str, role: str) -> str:
    """``auto``: CUDA when torch sees a device, else the CPU; ``cuda`` where there is none: one line."""
    if device not in DEVICES and not device.startswith("cuda:"):
        raise ConfigError(
            f"{role}.device={device!r} is not valid; choose one of {', '.join(DEVICES)} (or cuda:N)"
        )
    torch = _torch(role)
    has_cuda = bool(torch.cuda.is_available())
    if device.startswith("cuda") and not has_cuda:
        build = "a CPU-only build of torch" if torch.version.cuda is None else "no visible CUDA device"
        raise ConfigError(
            f"{role}.device={device} but torch sees no CUDA device ({build}, torch "
            f"{torch.__version__}); fix: {role}.device=auto (or cpu), or install a CUDA build of torch"
        )
    if device == "auto":
        return "cuda" if has_cuda else "cpu"
    return device


def pick_dtype(dtype: str, device: str, role: str) -> str:
    """``auto``: float32 on the CPU (bfloat16 matmuls are slow there), bfloat16 (else float16) on CUDA."""
    if dtype not in DTYPES:
        raise ConfigError(f"{role}.dtype={dtype!r} is not valid; choose one of {', '.join(DTYPES)}")
    if dtype != "auto":
        return dtype
    if device == "cpu":
        return "float32"
    import torch

    return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"


class LocalModel:
    """A loaded model and its tokenizer."""

    def __init__(self, source: ModelSource, *, device: str, dtype: str, role: str) -> None:
        self.source = source
        self.device = device
        self.dtype = dtype
        header = inspect_weights(source, role)
        self.parameters = header.parameters
        self.memory_bytes = check_memory(header, dtype=dtype, device=device, role=role, name=source.name)
        torch = _torch(role)
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        kwargs: dict[str, Any] = {"gguf_file": source.gguf_file} if source.gguf_file else {}
        start = time.perf_counter()
        try:
            self.tokenizer: Any = AutoTokenizer.from_pretrained(source.folder, **kwargs)
            self.model: Any = AutoModelForCausalLM.from_pretrained(
                source.folder, dtype=getattr(torch, dtype), **kwargs
            )
        except ValueError as exc:
            if "not supported" in str(exc) or "architecture" in str(exc).lower():
                raise ModelLoadError(
                    f"{role}.model={source.name!r}: architecture {header.architecture!r} is not "
                    f"supported by transformers' GGUF reader; fix: use a model of a supported "
                    f"architecture (llama, mistral, qwen2, phi3, gemma2...), or its safetensors "
                    f"folder"
                ) from None
            raise ModelLoadError(
                f"{role}.model={source.name!r} could not be loaded ({type(exc).__name__}: "
                f"{' '.join(str(exc).split())[:160]}); fix: download it again"
            ) from None
        except (OSError, KeyError, RuntimeError) as exc:
            raise ModelLoadError(
                f"{role}.model={source.name!r} could not be loaded ({type(exc).__name__}: "
                f"{' '.join(str(exc).split())[:160]}); fix: download it again, or check "
                f"{role}.model"
            ) from None
        model: Any = self.model
        model.to(device)
        model.eval()
        self.load_s = time.perf_counter() - start
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if not getattr(self.tokenizer, "chat_template", None):
            raise ModelLoadError(
                f"{role}.model={source.name!r} has no chat template; fix: use an instruct model "
                f"(its tokenizer ships one)"
            )
        window = getattr(self.model.config, "max_position_embeddings", None) or header.context_window
        self.context_window = int(window) if window else 2048
        self._generate = threading.Lock()
        self._plans: dict[Graded, Plan | None] = {}
        self._plans_lock = threading.Lock()
        log.info(
            "%s: loaded %s (%.0fM parameters, %s on %s) in %.1f s",
            role,
            source.name,
            self.parameters / 1e6,
            dtype,
            device,
            self.load_s,
        )

    def prompt_ids(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """The token ids of ``messages`` under the model's chat template, ready for the reply."""
        ids: Any = self.tokenizer.apply_chat_template(
            [dict(m) for m in messages], add_generation_prompt=True, tokenize=True
        )
        if isinstance(ids, Mapping):  # transformers 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return [int(t) for t in ids]

    def count(self, messages: Sequence[Mapping[str, str]]) -> int:
        """Prompt tokens of ``messages``, counted by the model's own tokenizer."""
        return len(self.prompt_ids(messages))

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = 0,
    ) -> list[Generated]:
        """The replies to ``prompts`` (token ids), generated as one left-padded batch."""
        import torch

        pad = int(self.tokenizer.pad_token_id)
        ids, mask = _left_padded(prompts, pad)
        width = ids.shape[1]
        sampling: dict[str, Any] = {"do_sample": False}
        if temperature > 0:
            sampling = {"do_sample": True, "temperature": float(temperature), "top_p": float(top_p)}
        with self._generate, torch.inference_mode():
            if temperature > 0 and seed is not None:
                torch.manual_seed(int(seed))
            out = self.model.generate(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                max_new_tokens=int(max_new_tokens),
                pad_token_id=pad,
                **sampling,
            )
        stops = _stop_ids(self.model, self.tokenizer)
        replies: list[Generated] = []
        for row, prompt in enumerate(prompts):
            new = [int(t) for t in out[row, width:].tolist()]
            n = len(new)
            for i, t in enumerate(new):
                if t in stops:
                    n = i + 1
                    break
            text = str(self.tokenizer.decode(new[:n], skip_special_tokens=True)).strip()
            replies.append(Generated(text, len(prompt), n))
        return replies


    def plan(self, graded: Graded) -> Plan | None:
        """How this model's tokenizer spells ``graded``'s verdict (``ragbench.llm.local.grammar.plan``)."""
        with self._plans_lock:
            if graded not in self._plans:
                encode = self.tokenizer.encode
                self._plans[graded] = plan(graded, lambda text: encode(text, add_special_tokens=False))
            return self._plans[graded]

    def choose(
        self,
        prompts: Sequence[Sequence[int]],
        tokens: Sequence[int],
        *,
        temperature: float = 0.0,
        seed: int | None = 0,
    ) -> list[int]:
        """Per prompt (token ids, the forced prefix included), the index in ``tokens`` of the next token
        the model picks among them: one left-padded forward pass, greedy (sampled from their softmax when
        a temperature is set)."""
        import torch

        pad = int(self.tokenizer.pad_token_id)
        ids, mask = _left_padded(prompts, pad)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # left padding: each prompt's own positions
        with self._generate, torch.inference_mode():
            out = self.model(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                position_ids=positions.to(self.device),
                use_cache=False,
                logits_to_keep=1,
            )
            logits = out.logits[:, -1, :][:, list(tokens)].float()
            if temperature > 0:
                if seed is not None:
                    torch.manual_seed(int(seed))
                drawn = torch.multinomial(torch.softmax(logits / float(temperature), dim=-1), 1)
                return [int(i) for i in drawn[:, 0].tolist()]
        return [pick(row) for row in logits.tolist()]


def _left_padded(prompts: Sequence[Sequence[int]], pad: int) -> tuple[Any, Any]:
    """``prompts`` (token ids) as one left-padded batch: (ids, attention mask), torch tensors."""
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
        mask[row, width - len(prompt) :] = 1
    return ids, mask


def _stop_ids(model: Any, tokenizer: Any) -> set[int]:
    eos = getattr(model.generation_config, "eos_token_id", None)
    ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return {int(i) for i in ids}


def load(
    source: ModelSource,
    *,
    device: str = "auto",
    dtype: str = "auto",
    threads: int | None = None,
    role: str = "llm",
) -> LocalModel:
    """The model of ``source`` on ``device`` in ``dtype``, loaded once per process."""
    if source.problem is not None:
        raise ConfigError(source.problem)
    where = pick_device(device, role)
    kind = pick_dtype(dtype, where, role)
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ConfigError(
                f"{role}.threads must be an integer >= 1 or null (torch's default), got {threads!r}"
            )
        import torch

        torch.set_num_threads(threads)
    key = (source.name, where, kind)
    models = _models()
    with models.lock:
        model = models.by_key.get(key)
        if model is None:
            model = models.by_key[key] = LocalModel(source, device=where, dtype=kind, role=role)
    return model


@dataclass
class _Models:
    """The local models the session has loaded, kept for its later jobs (a cache of ``ragbench.session``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    by_key: dict[tuple[str, str, str], LocalModel] = field(default_factory=dict)


def _models() -> _Models:
    return session.current().caches.slot(__name__, _Models)


def loaded() -> list[LocalModel]:
    """The models this session has loaded (benchmarks, tests)."""
    models = _models()
    with models.lock:
        return list(models.by_key.values())
