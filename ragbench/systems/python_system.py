"""``system=python system.target=mypkg.rag:answer``: a user's RAG function, called once per question.

The callable takes the question text and ``system.params`` as keyword arguments (and ``contexts=`` -- a
list of ``{id, title, text}`` -- when ragbench retrieved and the function only answers), and returns the
record of ``ragbench.systems.records`` (a dict, or a JSON string). It runs in a worker thread so
``system.timeout`` bounds the whole call (``ragbench.llm.deadline``); a stalled call is abandoned (the
thread cannot be killed) and counted as a timeout. A reply whose strings hold more than
``system.max_record_chars`` characters fails its case, as an HTTP system's longer body does. Its
``identity`` attribute, if any, names its version in the reply cache key.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragbench.errors import ConfigError
from ragbench.llm.endpoint import LLMEndpoint
from ragbench.systems.client import (
    MAX_RECORD_CHARS,
    SystemClient,
    SystemFunctionError,
    check_limits,
    payload,
    system_endpoint,
)
from ragbench.systems.records import SystemRecord
from ragbench.types import Context, Query


def load_target(target: str) -> Callable[..., Any]:
    """The callable named ``module:function`` (or ``module.function``), or one ConfigError with the fix."""
    module_name, sep, attr = target.partition(":")
    if not sep:
        module_name, _, attr = target.rpartition(".")
    if not module_name or not attr:
        raise ConfigError(f"system.target={target!r} is not module:function; fix: e.g. system.target=mypkg.rag:answer")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"system.target={target!r}: cannot import {module_name!r} ({exc}); fix: install the package "
                          "or run from the folder that holds the module") from None
    fn: Any = module
    for part in attr.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise ConfigError(f"system.target={target!r}: {module_name} has no {attr!r}; fix: name a callable")
    if not callable(fn):
        raise ConfigError(f"system.target={target!r} is not callable; fix: name a function")
    return fn


def params_digest(params: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:12]


class PythonSystem:
    """A Python callable as a RAG system (see the module docstring)."""

    kind = "python"

    def __init__(self, *, target: str | None = None, params: Mapping[str, Any] | None = None,
                 identity: str | None = None, max_record_chars: int = MAX_RECORD_CHARS,
                 endpoint: LLMEndpoint | None = None, **settings: Any) -> None:
        """``endpoint`` with ``settings`` (``system.timeout``, ``num_retries``...) over it."""
        if not target:
            raise ConfigError("system=python needs system.target=module:function (a callable returning "
                              "{qid?, answer, contexts})")
        endpoint = system_endpoint(endpoint, settings)
        check_limits(endpoint.timeout, max_record_chars)
        self.target = target
        self.fn = load_target(target)
        self.params = dict(params or {})
        accepts = inspect.signature(self.fn).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepts.values())
        unknown = sorted(k for k in self.params if k not in accepts and not takes_any)
        if unknown:
            raise ConfigError(f"system.params.{unknown[0]} is not a parameter of {target} (it takes "
                              f"{', '.join(accepts)}); fix: drop it or add it to the function")
        self.takes_contexts = takes_any or "contexts" in accepts
        self.takes_history = takes_any or "history" in accepts  # a conversation's earlier turns
        declared = identity or getattr(self.fn, "identity", None) or f"python:{target}"
        self.identity = f"{declared}|params={params_digest(self.params)}"
        self.client = SystemClient(endpoint, where=f"system {target}", max_record_chars=max_record_chars)

    def record(self, query: Query, contexts: Sequence[Context] | None = None) -> SystemRecord:
        if contexts is not None and not self.takes_contexts:
            raise ConfigError(f"{self.target} takes no contexts= argument, so it cannot answer from ragbench's "
                              "retrieval; fix: add a contexts=None parameter, or use retrieval=system")
        return self.client.call(payload(query, contexts, self.params), self.identity, self._send)

    def _send(self, ask: Mapping[str, Any], timeout: float) -> Any:
        """One call of the function (in the client's worker thread, under ``system.timeout``)."""
        kwargs = dict(ask["params"])
        if "contexts" in ask:
            kwargs["contexts"] = ask["contexts"]
        if "history" in ask and self.takes_history:  # a conversation's turn: its earlier turns
            kwargs["history"] = ask["history"]
        try:
            reply = self.fn(ask["question"], **kwargs)
        except BaseException as exc:  # noqa: BLE001 - the user's code: any failure is the case's failure
            raise SystemFunctionError(f"{self.target} raised {type(exc).__name__}: {exc}") from None
        if isinstance(reply, dict) and "qid" not in reply:
            reply = {"qid": ask["qid"], **reply}
        return reply
