"""``system=http system.url=http://host:port/answer``: a RAG service, asked once per question.

Each question is one ``POST`` of a JSON object ``{qid, question, params, contexts?}`` (``contexts`` only when
ragbench retrieved and the service answers); the reply is the JSON record of ``ragbench.systems.records``.
A refused or dropped connection (a killed server), a stall past ``system.timeout``, a 5xx or 429 and a reply
that is not a record are the LLM failure classes (retried, then the case fails); a 4xx is not retried.
``system.api_key_env`` names an environment variable sent as ``Authorization: Bearer``; it is masked in
replies, errors and logs.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from ragbench.errors import ConfigError
from ragbench.llm.errors import (
    LLMAuthError,
    LLMConnectionError,
    LLMRateLimitError,
    LLMRequestError,
    LLMResponseError,
    LLMServerError,
    LLMTimeoutError,
)
from ragbench.redact import register
from ragbench.systems.client import SystemClient, payload
from ragbench.systems.python_system import params_digest
from ragbench.systems.records import SystemRecord
from ragbench.types import Context, Query

MAX_REPLY_BYTES = 16_000_000


class HttpSystem:
    """A RAG service behind an HTTP endpoint (see the module docstring)."""

    kind = "http"

    def __init__(self, *, url: str | None = None, params: Mapping[str, Any] | None = None,
                 identity: str | None = None, api_key_env: str | None = None, timeout: float = 60.0,
                 num_retries: int = 2, backoff_s: float = 1.0, max_concurrency: int = 4,
                 max_consecutive_failures: int = 5, max_record_chars: int = MAX_REPLY_BYTES,
                 takes_contexts: bool = True) -> None:
        if not url or not str(url).startswith(("http://", "https://")):
            raise ConfigError(f"system=http needs system.url=http://host:port/path (got {url!r})")
        if api_key_env and not os.environ.get(api_key_env):
            raise ConfigError(f"system.api_key_env names {api_key_env}, which is not set; fix: export it, or set "
                              "system.api_key_env=null")
        self.url = str(url)
        self.params = dict(params or {})
        self.api_key_env = api_key_env
        self.max_record_chars = max_record_chars
        self.takes_contexts = takes_contexts
        self.identity = f"{identity or 'http:' + self.url}|params={params_digest(self.params)}"
        self.client = SystemClient(where=f"system at {self.url}", timeout=timeout, num_retries=num_retries,
                                   backoff_s=backoff_s, max_concurrency=max_concurrency,
                                   max_consecutive_failures=max_consecutive_failures)

    def record(self, query: Query, contexts: Sequence[Context] | None = None) -> SystemRecord:
        return self.client.call(payload(query, contexts, self.params), self.identity, self._send)

    def _send(self, ask: Mapping[str, Any], timeout: float) -> bytes:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        secret = os.environ.get(self.api_key_env) if self.api_key_env else None
        if secret:
            register(secret)
            headers["Authorization"] = f"Bearer {secret}"
        request = urllib.request.Request(self.url, data=json.dumps(ask).encode("utf-8"), headers=headers,
                                         method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the user's URL
                body: bytes = response.read(self.max_record_chars + 1)
        except urllib.error.HTTPError as exc:
            status = exc.code
            cls = (LLMRateLimitError if status == 429 else LLMAuthError if status in (401, 403)
                   else LLMServerError if status >= 500 or status in (408, 409) else LLMRequestError)
            raise cls(f"HTTP {status} {exc.reason}") from None
        except TimeoutError as exc:
            raise LLMTimeoutError(f"no reply within system.timeout={timeout:g}s ({exc})") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError | socket.timeout):
                raise LLMTimeoutError(f"no reply within system.timeout={timeout:g}s") from None
            raise LLMConnectionError(f"cannot connect: {exc.reason}") from None
        except (ConnectionError, http.client.HTTPException, OSError) as exc:  # a server killed mid-reply
            raise LLMConnectionError(f"the connection broke: {type(exc).__name__}: {exc}") from None
        if len(body) > self.max_record_chars:
            raise LLMResponseError(f"the reply is longer than system.max_record_chars={self.max_record_chars:,} bytes")
        return body
