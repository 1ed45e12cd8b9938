"""``system=http system.url=http://host:port/answer``: a RAG service, asked once per question.

Each question is one ``POST`` of a JSON object ``{qid, question, params, contexts?}`` (``contexts`` only when
ragbench retrieved and the service answers); the reply is the JSON record of ``ragbench.systems.records``.
A refused or dropped connection (a killed server), a call not complete within ``system.timeout`` (a
deadline for the whole call: connect, headers and body, so a server trickling its reply cannot hold it;
the connection is shut down when it passes), a 5xx or 429 and a reply that is not a record are the LLM
failure classes (retried, then the case fails); a 4xx is not retried. ``system.api_key_env`` names an
environment variable sent as ``Authorization: Bearer``; a URL's ``user:password@`` is sent as
``Authorization: Basic``. Both are masked in replies, errors, logs and the run's params, tags and name.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from ragbench.errors import ConfigError
from ragbench.llm import deadline
from ragbench.llm.endpoint import LLMEndpoint
from ragbench.llm.errors import (
    LLMAuthError,
    LLMConnectionError,
    LLMRateLimitError,
    LLMRequestError,
    LLMServerError,
    LLMTimeoutError,
)
from ragbench.redact import MASK, register
from ragbench.systems.client import MAX_RECORD_CHARS, SystemClient, payload, system_endpoint
from ragbench.systems.python_system import params_digest
from ragbench.systems.records import SystemRecord
from ragbench.types import Context, Query

MAX_REPLY_BYTES = MAX_RECORD_CHARS


def split_credentials(url: str) -> tuple[str, str, str | None]:
    """(the URL without ``user:password@``, the URL as shown: the password masked, the ``Authorization:
    Basic`` value or None). ``http://user:key@host/answer`` -> ``http://host/answer``,
    ``http://user:***@host/answer``; the user and the password are registered as secrets."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, url, None
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    host = parts.netloc.rpartition("@")[2]
    userinfo = parts.netloc.rpartition("@")[0]
    register(userinfo)
    register(password)
    bare = urllib.parse.urlunsplit(parts._replace(netloc=host))
    shown = urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username or ''}:{MASK}@{host}"))
    basic = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return bare, shown, f"Basic {basic}"


def _tracked(cls: type[http.client.HTTPConnection]) -> type[http.client.HTTPConnection]:
    """``cls`` whose socket, once connected, is registered with the attempt's deadline (shut down when it
    passes, so a server trickling headers or body one byte at a time is cut off)."""

    class Tracked(cls):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            super().connect()
            deadline.track(self.sock)

    Tracked.__name__ = f"Tracked{cls.__name__}"
    return Tracked


_TRACKED = {http.client.HTTPConnection: _tracked(http.client.HTTPConnection),
            http.client.HTTPSConnection: _tracked(http.client.HTTPSConnection)}


class _HTTPHandler(urllib.request.HTTPHandler):
    def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
        return super().do_open(_TRACKED.get(http_class, http_class), req, **kwargs)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
        return super().do_open(_TRACKED.get(http_class, http_class), req, **kwargs)


_OPENER = urllib.request.build_opener(_HTTPHandler, _HTTPSHandler)


class HttpSystem:
    """A RAG service behind an HTTP endpoint (see the module docstring)."""

    kind = "http"

    def __init__(self, *, url: str | None = None, params: Mapping[str, Any] | None = None,
                 identity: str | None = None, max_record_chars: int = MAX_REPLY_BYTES, takes_contexts: bool = True,
                 endpoint: LLMEndpoint | None = None, **settings: Any) -> None:
        """``endpoint`` with ``settings`` (``system.api_key_env``, ``timeout``, ``num_retries``...) over it."""
        if not url or not str(url).startswith(("http://", "https://")):
            raise ConfigError(f"system=http needs system.url=http://host:port/path (got {url!r})")
        try:
            self.url, self.shown_url, self.basic_auth = split_credentials(str(url))
        except ValueError as exc:  # a port that is not a number, a bracket left open
            raise ConfigError(f"system.url is not a URL ({exc}); fix: system.url=http://host:port/path") from None
        endpoint = system_endpoint(endpoint, settings)
        if endpoint.api_key_env and self.basic_auth:
            raise ConfigError(f"system.url {self.shown_url} carries a user and password and system.api_key_env "
                              "is set too: both would be the Authorization header; fix: keep one of them")
        self.params = dict(params or {})
        self.api_key_env = endpoint.api_key_env
        self.max_record_chars = max_record_chars
        self.takes_contexts = takes_contexts
        # the URL without its credentials: a new password does not change the system's answers
        self.identity = f"{identity or 'http:' + self.url}|params={params_digest(self.params)}"
        self.client = SystemClient(endpoint, where=f"system at {self.shown_url}", max_record_chars=max_record_chars)

    def record(self, query: Query, contexts: Sequence[Context] | None = None) -> SystemRecord:
        return self.client.call(payload(query, contexts, self.params), self.identity, self._send)

    def _send(self, ask: Mapping[str, Any], timeout: float) -> bytes:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        secret = os.environ.get(self.api_key_env) if self.api_key_env else None
        if secret:
            register(secret)
            headers["Authorization"] = f"Bearer {secret}"
        elif self.basic_auth:
            headers["Authorization"] = self.basic_auth
        request = urllib.request.Request(self.url, data=json.dumps(ask).encode("utf-8"), headers=headers,
                                         method="POST")
        try:  # each socket operation waits at most ``timeout``; the whole call is bounded by the caller's deadline
            with _OPENER.open(request, timeout=timeout) as response:
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
        return body
