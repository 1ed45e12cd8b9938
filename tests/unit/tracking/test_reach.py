"""``ragbench.tracking.reach``: a tracking server that is down, wrong or silent is one line within the
deadline (loopback sockets in threads: no MLflow, no process)."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from importlib import resources

import pytest
from omegaconf import OmegaConf

from ragbench.errors import ConfigError
from ragbench.tracking import reach


def _refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed on return: nothing listens there


def test_a_refused_port_names_the_uri_and_the_fix():
    port = _refused_port()
    with pytest.raises(ConfigError) as err:
        reach.check(f"http://127.0.0.1:{port}", 5)
    text = str(err.value)
    assert text.startswith(f"tracking.uri=http://127.0.0.1:{port}: nothing listens there (connection "
                           "refused)")
    assert "fix: start the MLflow server" in text and "\n" not in text


def test_a_password_in_the_uri_never_reaches_the_message():
    with pytest.raises(ConfigError) as err:
        reach.check(f"http://alice:s3cret@127.0.0.1:{_refused_port()}", 5, key="--tracking-uri")
    assert "s3cret" not in str(err.value) and "alice" not in str(err.value)
    assert str(err.value).startswith("--tracking-uri=http://127.0.0.1:")
    assert reach.public_uri("postgresql://u:p@db:5432/mlflow") == "postgresql://db:5432/mlflow"


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A socket that listens and never accepts: the kernel completes the connection, nobody answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield sock
    sock.close()


def test_a_server_that_accepts_and_never_answers_is_one_line_at_the_deadline(listener):
    port = listener.getsockname()[1]
    with pytest.raises(ConfigError) as err:
        reach.check(f"http://127.0.0.1:{port}", 0.3)
    assert "no answer within 0.3 s (tracking.connect_timeout_s)" in str(err.value)
    assert "raise tracking.connect_timeout_s" in str(err.value)


class _Trickle:
    """Accepts, then sends a valid MLflow answer one byte every 0.05 s (each read well within any per-read
    timeout), finishing only after seconds: a deadline per socket read would wait for all of it and pass."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        body = b'{"experiments": []}'
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            for i in range(len(answer)):
                if self.stop.wait(0.05):
                    return
                try:
                    conn.sendall(answer[i:i + 1])
                except OSError:  # the prober hung up: what the test wants
                    return
                self.sent += 1


def test_a_trickling_server_cannot_hold_the_attempt_past_its_deadline():
    trickle = _Trickle()
    try:
        with pytest.raises(ConfigError) as err:
            reach.check(f"http://127.0.0.1:{trickle.sock.getsockname()[1]}", 0.5)
        assert "no answer within 0.5 s" in str(err.value)
        time.sleep(0.2)  # the prober's hang-up reaches the trickler at its next byte
        assert trickle.sent < 40  # cut off part way through the answer (56 bytes)
    finally:
        trickle.stop.set()
        trickle.sock.close()


class _Api(http.server.BaseHTTPRequestHandler):
    status = 200
    body = b'{"experiments": []}'
    seen: list[str | None] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).seen.append(self.headers.get("Authorization"))
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    _Api.status, _Api.body, _Api.seen = 200, b'{"experiments": []}', []


def test_an_mlflow_server_passes_with_the_clients_credentials(api, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "alice")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "pw")
    reach.check(api, 5)
    assert _Api.seen == ["Basic YWxpY2U6cHc="]


@pytest.mark.parametrize(("status", "body", "said"), [
    (401, b"", "refuses these credentials (HTTP 401); fix: set MLFLOW_TRACKING_USERNAME"),
    (404, b"<html>", "no MLflow tracking API there (HTTP 404"),
    (200, b"<html>hello</html>", "not as an MLflow tracking server"),
    (500, json.dumps({"error_code": "INTERNAL_ERROR", "message": "Detected out-of-date database schema "
                      "(found version 1b5f0d9ad7c1, but expected 8f7e4c9b1a2d). Take a backup of your "
                      "database, then run 'mlflow db upgrade <database_uri>'"}).encode(),
     "older MLflow schema; fix: on the server, back up the database, then run `mlflow db upgrade"),
    (503, b'{"message": "database is down"}', "the server failed (HTTP 503: database is down)"),
])
def test_a_wrong_server_is_one_line_naming_the_fix(api, status, body, said):
    _Api.status, _Api.body = status, body
    with pytest.raises(ConfigError) as err:
        reach.check(api, 5)
    assert said in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf")])
def test_a_timeout_that_is_not_a_positive_number_is_one_line(bad):
    with pytest.raises(ConfigError, match="tracking.connect_timeout_s=.*use a number of seconds > 0"):
        reach.check("http://127.0.0.1:1", bad)


def test_local_stores_are_not_probed():
    reach.check("sqlite:///nowhere/mlflow.db", 1)
    reach.check("file:///nowhere", 1)


def test_the_default_timeout_is_the_configs_and_the_commands_env(monkeypatch):
    conf = OmegaConf.load(str(resources.files("ragbench.conf").joinpath("tracking/mlflow.yaml")))
    assert conf.connect_timeout_s == reach.CONNECT_TIMEOUT_S == reach.default_timeout()
    monkeypatch.setenv(reach.TIMEOUT_ENV, "2.5")
    assert reach.default_timeout() == 2.5
    monkeypatch.setenv(reach.TIMEOUT_ENV, "soon")
    with pytest.raises(ConfigError, match="RAGBENCH_CONNECT_TIMEOUT_S='soon'"):
        reach.default_timeout()
