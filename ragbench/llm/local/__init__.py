"""``llm=local``: a language model ragbench runs itself, in process, on transformers (``.[local]``).

``source`` finds the weights (a GGUF file, a model folder, an installed package's bundled model or a hub
id) and checks them before anything loads; ``engine`` loads a model once per process and generates a
batch; ``runner`` answers a job's wave of requests (``ragbench.llm.wave``) with it; ``client`` is the
``LLMClient`` that sends its requests to that runner (same reply cache, ledger and waves); ``grammar``
decodes a graded verdict under its schema (``{"score": <allowed>}``) instead of generating it.
Nothing here imports torch or transformers at import time.
"""

from __future__ import annotations

PREFIX = "local"  # a model string "local" (the bundled model) or "local/<reference>" is served here


def is_local(model: object) -> bool:
    """Whether ``model`` names a local model (``local`` or ``local/<reference>``)."""
    return isinstance(model, str) and (model == PREFIX or model.startswith(PREFIX + "/"))


LITELLM_DEFAULT = (
    "openai/gpt-4o-mini"  # conf/judge/*.yaml's model: under judge.backend=local, the bundled model
)


def local_model(model: object) -> str:
    """A local model string for ``model``: ``local`` (the bundled model) when it is unset or the litellm
    default (``judge.backend=local`` with no ``judge.model``), else ``local/<reference>``."""
    if model is None or str(model) in ("", LITELLM_DEFAULT):
        return PREFIX
    return str(model) if is_local(model) else f"{PREFIX}/{model}"
