"""How many requests at once a model endpoint can serve: the default of ``llm.max_concurrency`` (and of a
judge's) when the config leaves it ``null``.

A self-hosted server queues what it cannot serve, and a queued request's time counts against the client's
``timeout``: with 8 requests in flight against llama.cpp's ``llama-server`` serving 4 slots, every first
attempt timed out and was sent again (issue 47). So, with ``max_concurrency: null``:

- an endpoint named by ``api_base`` is asked once for its slots, before the first request (the client's
  ``preflight``; building a component opens no connection): llama.cpp's server answers ``GET <root>/props``
  with ``total_slots`` (its ``-np``), and that many requests go at once;
- a server that does not say (vLLM, which batches continuously and has no such field; Ollama; a proxy), or
  cannot be reached within ``PROBE_TIMEOUT_S``, gets ``DEFAULT`` (a provider's endpoint is never probed);
- a model ragbench runs in this process (``llm=local``) is served one request at a time: ``LOCAL``.

A number in the config is used as given.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Callable

from ragbench.redact import redact

log = logging.getLogger(__name__)
DEFAULT = 8  # a provider's API, or a server that does not say (the former fixed default)
LOCAL = 1  # an in-process model: one generate call at a time (its batches are its parallelism)
PROBE_TIMEOUT_S = 2.0
MAX_BODY = 1 << 20  # /props carries the chat template: small, but never read without a bound


def props_url(api_base: str) -> str:
    """llama.cpp's ``/props`` beside an OpenAI-compatible base: ``http://h:8080/v1`` -> ``http://h:8080/props``."""
    root = api_base.rstrip("/")
    root = root[: -len("/v1")] if root.endswith("/v1") else root
    return f"{root}/props"


def server_slots(api_base: str, *, api_key_env: str | None = None, timeout: float = PROBE_TIMEOUT_S) -> int | None:
    """``total_slots`` of the server at ``api_base`` (llama.cpp), None when it does not say or cannot be
    reached. The key (from the variable *named* by ``api_key_env``) goes in the request header only."""
    request = urllib.request.Request(props_url(api_base), headers={"Accept": "application/json"})
    key = os.environ.get(api_key_env) if api_key_env else None
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the user's endpoint
            data = json.loads(response.read(MAX_BODY))
    except (OSError, ValueError, urllib.error.URLError) as exc:
        log.debug("no slot count from %s: %s", props_url(api_base), type(exc).__name__)
        return None
    slots = data.get("total_slots") if isinstance(data, dict) else None
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        return None
    return slots


def endpoint_concurrency(api_base: str | None, configured: int | None, *, api_key_env: str | None = None,
                         fallback: int = DEFAULT, probe: Callable[..., int | None] = server_slots) -> int:
    """``configured`` when set; else the slots of the server at ``api_base`` when it says (llama.cpp), else
    ``fallback`` (``DEFAULT``; ``LOCAL`` for an in-process model)."""
    if configured is not None:
        return configured
    if api_base:
        slots = probe(api_base, api_key_env=api_key_env)
        if slots is not None:
            log.info("%s serves %d requests at once (its /props total_slots): max_concurrency=%d",
                     redact(api_base), slots, slots)
            return slots
    return fallback
