"""Whether the tracking store at a URI answers, within ``tracking.connect_timeout_s`` for the whole attempt.

Every command that opens a store (a sweep or job, ``compare``, ``verify``, ``export``, ``ragbench ui``)
calls ``check`` first, so a server that is down, wrong or unanswered is one line naming the URI and the
fix, instead of MLflow's HTTP retries (7 with backoff: minutes of silence) or a traceback.

- ``http(s)://``: one GET of the tracking API (``experiments/search``, with MLflow's credentials from
  ``MLFLOW_TRACKING_USERNAME``/``PASSWORD`` or ``MLFLOW_TRACKING_TOKEN``), run in a thread and cut off at
  the deadline: a server that accepts and then trickles bytes cannot hold it longer.
- a database URI (``postgresql://``, ``mysql://``, ...): a connection with the driver's connect timeout,
  then the schema revision against the installed MLflow's (an older one: ``mlflow db upgrade``).
- ``sqlite:``, ``file:`` and paths are local files: ``ragbench.tracking.store`` checks those.

The URI in a message never carries its user or password.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import os
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ragbench.errors import ConfigError
from ragbench.tracking.store import schema_head

CONNECT_TIMEOUT_S = 10.0  # tracking.connect_timeout_s's default (conf/tracking/mlflow.yaml)
TIMEOUT_ENV = "RAGBENCH_CONNECT_TIMEOUT_S"  # the commands without a Hydra config: compare, verify, export, ui
SEARCH = "/api/2.0/mlflow/experiments/search?max_results=1"
DATABASES = ("postgresql", "mysql", "mssql")
SERVER_FIX = "start the MLflow server (docs/team.md), or correct {key}"
UPGRADE = ("back up the database, then run `mlflow db upgrade {uri}` (with its password) with this MLflow, "
           "and restart the server")


def default_timeout() -> float:
    """The deadline of the commands that take no Hydra config: ``$RAGBENCH_CONNECT_TIMEOUT_S``, else 10 s."""
    value = os.environ.get(TIMEOUT_ENV, "")
    try:
        return float(value) if value.strip() else CONNECT_TIMEOUT_S
    except ValueError:
        raise ConfigError(f"{TIMEOUT_ENV}={value!r}: use a number of seconds > 0 (default "
                          f"{CONNECT_TIMEOUT_S:g})") from None


def public_uri(uri: str) -> str:
    """``uri`` without its ``user:password@`` (a password never reaches a message or a log)."""
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def is_server(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def is_database(uri: str) -> bool:
    return uri.split(":", 1)[0].split("+", 1)[0] in DATABASES


def check(uri: str, timeout_s: float = CONNECT_TIMEOUT_S, *, key: str = "tracking.uri") -> None:
    """Returns when the store at ``uri`` answers as an MLflow store within ``timeout_s``; else a one-line
    ConfigError naming ``key=uri`` and the fix. Local stores return at once."""
    if not (isinstance(timeout_s, int | float) and math.isfinite(timeout_s) and timeout_s > 0):
        raise ConfigError(f"{_timeout_key(key)}={timeout_s!r}: use a number of seconds > 0 (default "
                          f"{CONNECT_TIMEOUT_S:g})")
    if is_server(uri):
        _check_server(uri, float(timeout_s), key)
    elif is_database(uri):
        _check_database(uri, float(timeout_s), key)


@dataclass
class _Reply:
    status: int = 0
    body: bytes = b""
    error: BaseException | None = None


def headers() -> dict[str, str]:
    """MLflow's own credentials, as its client sends them."""
    user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if user and password:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
    token = os.environ.get("MLFLOW_TRACKING_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


def _connection(uri: str, timeout_s: float) -> tuple[http.client.HTTPConnection, str]:
    parts = urlsplit(uri)
    path = parts.path.rstrip("/") + SEARCH
    if parts.scheme == "https":
        bundle = os.environ.get("MLFLOW_TRACKING_SERVER_CERT_PATH") or None
        context = ssl.create_default_context(cafile=bundle)
        if os.environ.get("MLFLOW_TRACKING_INSECURE_TLS", "").lower() == "true":
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        return http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=timeout_s,
                                           context=context), path
    return http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout_s), path


def _ask(conn: http.client.HTTPConnection, path: str, reply: _Reply) -> None:
    try:
        conn.request("GET", path, headers={"Accept": "application/json", **headers()})
        answer = conn.getresponse()
        reply.body = answer.read(65536)
        reply.status = answer.status
    except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
        reply.error = exc


def _check_server(uri: str, timeout_s: float, key: str) -> None:
    shown = public_uri(uri)
    where = f"{key}={shown}"
    try:
        conn, path = _connection(uri, timeout_s)
    except ValueError as exc:  # a port that is not a number
        raise ConfigError(f"{where}: not a server address ({exc}); fix: use http://host:port") from None
    reply = _Reply()
    worker = threading.Thread(target=_ask, args=(conn, path, reply), name="ragbench-reach", daemon=True)
    worker.start()
    worker.join(timeout_s)
    timed_out = isinstance(reply.error, TimeoutError)  # the socket's own timeout, at the deadline too
    if worker.is_alive() or timed_out:  # connected but no whole answer by the deadline (a trickle, a hang)
        if conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        conn.close()
        raise ConfigError(f"{where}: no answer within {timeout_s:g} s ({_timeout_key(key)}); fix: check that "
                          "the MLflow server is up and reachable from here (host, port, firewall, proxy), or "
                          f"raise {_timeout_key(key)}") from None
    conn.close()
    if reply.error is not None:
        raise ConfigError(f"{where}: {_network_reason(reply.error)}; fix: "
                          f"{_network_fix(reply.error, key)}") from None
    _judge_answer(reply, where, shown)


def _timeout_key(key: str) -> str:
    return TIMEOUT_ENV if key.startswith("--") else "tracking.connect_timeout_s"


def _network_reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "nothing listens there (connection refused)"
    if isinstance(exc, socket.gaierror):
        return f"the host name does not resolve ({exc.strerror or exc})"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or exc})"
    if isinstance(exc, http.client.HTTPException):
        return f"not an HTTP server ({type(exc).__name__})"
    return f"cannot connect ({type(exc).__name__}: {exc})"


def _network_fix(exc: BaseException, key: str) -> str:
    if isinstance(exc, ssl.SSLError):
        return ("set MLFLOW_TRACKING_SERVER_CERT_PATH to the server's CA bundle, or use http:// if the "
                "server has no TLS")
    return SERVER_FIX.format(key=key)


def _judge_answer(reply: _Reply, where: str, shown: str) -> None:
    status = reply.status
    if status == 200:
        try:
            json.loads(reply.body or b"{}")
        except ValueError:
            raise ConfigError(f"{where}: answers, but not as an MLflow tracking server (no JSON from "
                              f"{SEARCH.split('?')[0]}); fix: point it at the server's base URL "
                              "(http://host:5000)") from None
        return
    message = _server_message(reply.body)
    if status in (401, 403):
        raise ConfigError(f"{where}: the server refuses these credentials (HTTP {status}); fix: set "
                          "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (basic-auth app) or "
                          "MLFLOW_TRACKING_TOKEN to an account of the server") from None
    if status == 404:
        raise ConfigError(f"{where}: no MLflow tracking API there (HTTP 404 on {SEARCH.split('?')[0]}); fix: "
                          "point it at the server's base URL (http://host:5000, no path)") from None
    if "out-of-date database schema" in message or "mlflow db upgrade" in message:
        raise ConfigError(f"{where}: the server's database has an older MLflow schema; fix: on the server, "
                          + UPGRADE.format(uri="<its --backend-store-uri>")) from None
    raise ConfigError(f"{where}: the server failed (HTTP {status}: {message[:200] or 'no message'}); fix: "
                      "read the server's log (its database may be down or refusing it)") from None


def _server_message(body: bytes) -> str:
    text = body.decode("utf-8", "replace")
    try:
        found = json.loads(text)
        text = str(found.get("message", text)) if isinstance(found, dict) else text
    except ValueError:
        pass
    return " ".join(text.split())


def _check_database(uri: str, timeout_s: float, key: str) -> None:
    """A connection with the driver's timeout, then the schema revision."""
    shown = public_uri(uri)
    where = f"{key}={shown}"
    deadline = time.monotonic() + timeout_s
    try:
        import sqlalchemy
    except ImportError:  # pragma: no cover - MLflow depends on it
        return
    args: dict[str, Any] = {}
    scheme = uri.split(":", 1)[0]
    if scheme.startswith(("postgresql", "mysql")):
        args["connect_timeout"] = max(2, math.ceil(timeout_s))  # libpq's minimum is 2 s
    try:
        engine = sqlalchemy.create_engine(uri, connect_args=args, poolclass=sqlalchemy.pool.NullPool)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"{where}: its driver {exc.name} is not installed; fix: pip install "
                          "'ragbench[team]' (psycopg2-binary, for PostgreSQL)") from None
    except Exception as exc:  # noqa: BLE001 - an unparsable URI
        raise ConfigError(f"{where}: not a database URI ({type(exc).__name__}); fix: use "
                          "postgresql://user:password@host:5432/database") from None
    try:
        with engine.connect() as con:
            inspector = sqlalchemy.inspect(con)
            version = None
            if inspector.has_table("alembic_version"):
                version = con.execute(sqlalchemy.text("SELECT version_num FROM alembic_version")).scalar()
    except Exception as exc:  # noqa: BLE001 - the driver's error, in one line
        raise ConfigError(f"{where}: {_database_problem(exc, deadline, _timeout_key(key))}") from None
    finally:
        engine.dispose()
    if version is None:
        return  # a new, empty database: MLflow creates its tables
    head = schema_head()
    if version != head:
        raise ConfigError(f"{where}: the database has another MLflow's schema (revision {version}; this "
                          f"MLflow uses {head}); fix: if that is an older MLflow's, "
                          + UPGRADE.format(uri=shown) + "; if a newer one's, upgrade MLflow here") from None


def _database_problem(exc: BaseException, deadline: float, timeout_key: str) -> str:
    """The driver's error as 'what; fix: ...' (its first line; libpq's words for the usual ones)."""
    text = " ".join(str(getattr(exc, "orig", None) or exc).split())
    low = text.lower()
    if "password authentication failed" in low or "access denied" in low:
        return (f"the database refused the login ({_first(text)}); fix: correct the user and password in the "
                "URI (postgresql://USER:PASSWORD@host:port/db), or in ~/.pgpass")
    if "does not exist" in low and "database" in low:
        return (f"{_first(text)}; fix: create it (createdb, or CREATE DATABASE ... OWNER the user) or "
                "correct the database name in the URI")
    if "connection refused" in low or "could not connect" in low or "could not translate host" in low:
        return f"nothing answers ({_first(text)}); fix: start PostgreSQL there, or correct host and port"
    if "timeout" in low or time.monotonic() >= deadline:
        return (f"no answer within {timeout_key}; fix: check that the database is up and reachable from "
                f"here, or raise {timeout_key}")
    return f"cannot connect ({_first(text)}); fix: check the URI and the database's log"


def _first(text: str) -> str:
    for cut in (" (Background on this error", "\n"):
        text = text.split(cut, 1)[0]
    text = text.removeprefix("connection to server at ")
    return text[:200]
