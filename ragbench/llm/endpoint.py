"""LLMEndpoint: the settings of one model endpoint (model, api_base, key variable, sampling, timeouts,
retries, concurrency, reply bound, circuit breaker, provider batches), checked once, in one place.

The generator (``llm``), every LLM judge (``judge``), the query transforms (``query.transform.client``),
the outside systems (``system``) and ``datasets generate`` (``llm``, ``critic``) take one. In the config
they are flat keys of the component's node (``llm.model``, ``judge.max_concurrency``...), merged in from
the one shared node ``conf/_endpoint/llm.yaml`` through Hydra defaults; a component takes them as
keyword settings and folds them into its endpoint with ``LLMEndpoint.of`` (a key that is no setting is
one line naming it). ``role`` is the config node, named in every message. The API key is never a
setting: ``api_key_env`` names the environment variable it is read from at each call (a ``local`` model,
run in process, reads none).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragbench.errors import ConfigError
from ragbench.llm.local import is_local

if TYPE_CHECKING:
    from ragbench.llm.client import LLMClient

DAY_S = 24 * 3600.0  # batch_max_wait_s: a provider batch may take up to 24 h


@dataclass(frozen=True)
class LLMEndpoint:
    """One endpoint's settings (see the module docstring). ``max_concurrency`` None: the server's
    slots, asked at preflight (``ragbench.llm.slots``); ``batch`` None: as the job decides."""

    model: str | None = None
    role: str = "llm"
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.0
    max_tokens: int | None = 256
    timeout: float = 60.0
    num_retries: int = 3
    backoff_s: float = 1.0
    max_concurrency: int | None = 8
    max_reply_chars: int = 100_000
    max_consecutive_failures: int = 5
    batch: bool | None = None
    batch_poll_s: float = 30.0
    batch_max_wait_s: float = DAY_S

    def __post_init__(self) -> None:
        role = self.role
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ConfigError(f"{role}.max_concurrency must be >= 1, got {self.max_concurrency}")
        for name, low in (("max_reply_chars", 1), ("max_consecutive_failures", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{role}.{name} must be an integer >= {low}, got {value!r}")
        if self.batch is not None and not isinstance(self.batch, bool):
            raise ConfigError(f"{role}.batch must be true or false, got {self.batch!r}")
        for name in ("timeout", "batch_poll_s", "batch_max_wait_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
                raise ConfigError(f"{role}.{name} must be a number of seconds > 0, got {value!r}")
        if self.api_key_env and not is_local(self.model) and not os.environ.get(self.api_key_env):
            raise ConfigError(
                f"{role}.api_key_env names the environment variable {self.api_key_env}, which is not set\n"
                f"  fix: export {self.api_key_env}=<your key> (any non-empty value for a server without auth), "
                f"or set {role}.api_key_env=null (no key; litellm then reads the provider's default variable)"
            )

    @classmethod
    def of(cls, role: str, endpoint: LLMEndpoint | None = None, settings: Mapping[str, Any] | None = None,
           **defaults: Any) -> LLMEndpoint:
        """``endpoint`` (else one of ``defaults``) with ``settings`` over it, as ``role``: how a component
        folds the flat keys of its config node into its endpoint. A key that is no setting is one
        ConfigError naming ``<role>.<key>``."""
        given = {str(k): v for k, v in (settings or {}).items()}
        unknown = sorted(set(given) - set(SETTINGS))
        if unknown:
            near = difflib.get_close_matches(unknown[0], SETTINGS, n=1)
            hint = f"did you mean {role}.{near[0]}?" if near else f"settings: {', '.join(SETTINGS)}"
            raise ConfigError(f"{role}.{unknown[0]} is not a setting of an LLM endpoint; {hint}")
        if endpoint is None:
            return cls(role=role, **{**defaults, **given})
        return dataclasses.replace(endpoint, role=role, **given)

    def settings(self) -> dict[str, Any]:
        """The settings as keyword arguments (``role`` included)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def client(self, **options: Any) -> LLMClient:
        """The LLM client of this endpoint; ``options``: the client's own (``cache``), settings that differ
        for this client, and for a ``local`` model (a ``LocalClient``) the local keys (device, dtype...)."""
        from ragbench.llm.client import (  # deferred: import cycle ragbench.llm.endpoint -> ragbench.llm.client
            LLMClient,
        )

        return LLMClient(**{**self.settings(), **options})


SETTINGS = tuple(f.name for f in dataclasses.fields(LLMEndpoint) if f.name != "role")
