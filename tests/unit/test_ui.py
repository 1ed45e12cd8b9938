"""``ragbench ui``: the URLs it prints, the sweep's saved view, what it reads from a sqlite store, its errors."""

from __future__ import annotations

import http.server
import json
import socket
import sqlite3
import threading
from urllib.parse import parse_qs, unquote

import pytest

from ragbench import ui


def test_runs_url_selects_the_machine_learning_workflow():
    assert ui.runs_url("http://127.0.0.1:5000", "7") == (
        "http://127.0.0.1:5000/#/experiments/7/runs?workflowType=machine_learning")
    url = ui.sweep_url("http://h:1", "7", "abc")
    query = parse_qs(url.split("?", 1)[1])
    assert query["searchFilter"] == ["tags.mlflow.parentRunId = 'abc'"]
    assert query["orderByKey"] == ["metrics.`headline/answer_f1`"] and query["orderByAsc"] == ["false"]
    assert unquote(ui.view_url("http://h:1", "7", "ragbench-sweep-abc")).endswith(
        "runs?workflowType=machine_learning&viewStateShareKey=ragbench-sweep-abc")


def test_sweep_view_shows_its_jobs_with_headline_metrics_and_varying_params():
    view = json.loads(ui.sweep_view("abc", ["retrieval.topk"], ["headline/answer_f1", "headline/mrr_at_10", "other/x"]))
    assert view["searchFilter"] == "tags.mlflow.parentRunId = 'abc'"
    assert view["selectedColumns"] == ["metrics.`headline/answer_f1`", "metrics.`headline/mrr_at_10`",
                                       "params.`retrieval.topk`"]
    assert view["columnOrder"][0] == ui.NAME_COLUMN and set(view["columnWidths"]) == {ui.NAME_COLUMN,
                                                                                      *view["selectedColumns"]}


class _Client:
    def __init__(self) -> None:
        self.tags: dict[tuple[str, str], str] = {}

    def set_experiment_tag(self, exp: str, key: str, value: str) -> None:
        self.tags[(exp, key)] = value


def test_save_sweep_view_is_an_experiment_tag():
    client = _Client()
    key = ui.save_sweep_view(client, "3", "abc", ["a"] * 20, ["headline/answer_f1"])
    value = json.loads(client.tags[("3", ui.VIEW_TAG + key)])
    assert key == "ragbench-sweep-abc" and len(value["selectedColumns"]) == 9  # 8 params at most


def test_store_ids_reads_the_experiment_latest_sweep_and_views(tmp_path):
    db = tmp_path / "mlflow.db"
    con = sqlite3.connect(db)
    con.executescript("""
        CREATE TABLE experiments (experiment_id INTEGER, name TEXT, lifecycle_stage TEXT);
        CREATE TABLE runs (run_uuid TEXT, experiment_id INTEGER, lifecycle_stage TEXT, start_time INTEGER);
        CREATE TABLE tags (key TEXT, value TEXT, run_uuid TEXT);
        CREATE TABLE experiment_tags (key TEXT, value TEXT, experiment_id INTEGER);
        INSERT INTO experiments VALUES (0, 'Default', 'active'), (4, 'ragbench', 'active');
        INSERT INTO runs VALUES ('old', 4, 'active', 1), ('new', 4, 'active', 2), ('job', 4, 'active', 3);
        INSERT INTO tags VALUES ('ragbench.role', 'sweep', 'old'), ('ragbench.role', 'sweep', 'new'),
                                ('ragbench.role', 'job', 'job');
        INSERT INTO experiment_tags VALUES ('mlflow.sharedViewState.ragbench-sweep-new', '{}', 4);
    """)
    con.commit()
    con.close()
    assert ui.store_ids(db, "ragbench") == ("4", "new", {"ragbench-sweep-new"})
    assert ui.store_ids(db, "nope") == (None, None, set())


def test_no_store_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert ui.run(["--no-browser"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no MLflow store at" in err and "run from the folder the jobs ran in" in err
    assert ui.run(["--tracking-uri", "postgresql://me:hunter2@127.0.0.1:5432/mlflow"]) == 2
    err = capsys.readouterr().err
    assert "not a sqlite store" in err and "pass the server's http:// URL" in err and "hunter2" not in err


def _store(tmp_path, created: int = 1700000000000):
    """A sqlite file with MLflow's experiments table (and the others ``store_ids`` reads)."""
    db = tmp_path / "mlflow.db"
    con = sqlite3.connect(db)
    con.executescript(f"""
        CREATE TABLE experiments (experiment_id INTEGER, name TEXT, lifecycle_stage TEXT,
                                  creation_time INTEGER);
        CREATE TABLE runs (run_uuid TEXT, experiment_id INTEGER, lifecycle_stage TEXT, start_time INTEGER);
        CREATE TABLE tags (key TEXT, value TEXT, run_uuid TEXT);
        CREATE TABLE experiment_tags (key TEXT, value TEXT, experiment_id INTEGER);
        INSERT INTO experiments VALUES (1, 'ragbench', 'active', {created});
        INSERT INTO runs VALUES ('sweep1', 1, 'active', 1);
        INSERT INTO tags VALUES ('ragbench.role', 'sweep', 'sweep1');
    """)
    con.commit()
    con.close()
    return db


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_an_invalid_port_is_one_line_not_the_servers_traceback(tmp_path, capsys, port):
    """Issue 45.9: --port 99999 reached the MLflow child, whose OverflowError was a traceback."""
    db = _store(tmp_path)
    assert ui.run(["--tracking-uri", f"sqlite:///{db}", "--port", port, "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--port {port} is not a port; pass one from 1 to 65535" in err


@pytest.mark.parametrize("content", ["text", "other-sqlite", "folder"])
def test_a_store_that_is_not_an_mlflow_store_is_one_line(tmp_path, capsys, content):
    """Issue 45.9: a store file that is not MLflow's (ui.store_ids) was a sqlite3 traceback."""
    db = tmp_path / "notes.db"
    if content == "text":
        db.write_text("my notes\n" * 100)
    elif content == "other-sqlite":
        sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.commit()
    else:
        db.mkdir()
    assert ui.run(["--tracking-uri", f"sqlite:///{db}", "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"ragbench ui: error: {db} is not an MLflow store (")
    assert "pass --tracking-uri sqlite:///" in err


class _Server(http.server.BaseHTTPRequestHandler):
    experiment: dict[str, object] = {}
    status = 200

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = json.dumps({"experiment": self.experiment}).encode()
        self.send_response(self.status if self.path.startswith("/api/2.0/mlflow/experiments/get?") else 404)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server():
    """A loopback HTTP server in a thread answering MLflow's experiments/get (no process, no MLflow)."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def test_a_server_serves_this_store_only_with_its_experiments_name_and_creation_time(tmp_path, server):
    stamp = ui.experiment_stamp(_store(tmp_path), "1")
    assert stamp == {"name": "ragbench", "creation_time": "1700000000000"}
    base = ui.base_url("127.0.0.1", server.server_address[1])
    assert ui.port_in_use("127.0.0.1", server.server_address[1])
    _Server.experiment = {"experiment_id": "1", "name": "ragbench", "creation_time": 1700000000000}
    assert ui.serves(base, "1", stamp)
    _Server.experiment = {"experiment_id": "1", "name": "ragbench", "creation_time": 1600000000000}  # not it
    assert ui.serves(base, "1", stamp) is False
    assert ui.serves(ui.base_url("127.0.0.1", ui.free_port("127.0.0.1")), "1", stamp) is False  # nothing there
    _Server.status = 403  # MLflow refusing a Host outside its allowed hosts: it cannot tell
    try:
        assert ui.serves(base, "1", stamp) is None
    finally:
        _Server.status = 200


class _Proc:
    """A server that has exited (so ``run`` never signals its process group)."""

    pid = -1

    def poll(self) -> int | None:
        return 0

    def wait(self, timeout: float | None = None) -> int:
        return 0


@pytest.fixture
def started(monkeypatch):
    """The server commands ``ui.run`` would start (none is), each 'up' at once."""
    commands: list[list[str]] = []

    def popen(command: list[str], **kwargs: object) -> _Proc:
        commands.append(command)
        return _Proc()

    monkeypatch.setattr(ui.subprocess, "Popen", popen)
    monkeypatch.setattr(ui, "wait_until_up", lambda base, proc, ours=None: True)
    return commands


def _port(command: list[str]) -> int:
    return int(command[command.index("--port") + 1])


@pytest.mark.parametrize(("explicit", "theirs", "code"), [
    (False, False, 0),  # the default port held by another store's server: a free one, said on stderr
    (True, False, 1),  # --port given and held by another store's server: one line, nothing started
    (False, True, 0),  # a server already on this store: its URLs, nothing started
], ids=["default-port-taken", "given-port-taken", "already-served"])
def test_a_port_held_by_another_server_is_never_trusted(tmp_path, capsys, monkeypatch, started, explicit,
                                                         theirs, code):
    """Issue 45.4: with the port already served by another MLflow server, ``ragbench ui`` printed URLs into
    that other store and said "serving" (also on the default port 5000)."""
    db = _store(tmp_path)
    monkeypatch.setattr(ui, "port_in_use", lambda host, port: port == 5000)
    monkeypatch.setattr(ui, "serves", lambda base, exp, stamp: theirs and base.endswith(":5000"))
    argv = ["--tracking-uri", f"sqlite:///{db}", "--no-browser", *(["--port", "5000"] if explicit else [])]
    assert ui.run(argv) == code
    out, err = capsys.readouterr()
    if theirs:
        assert started == [] and "http://127.0.0.1:5000 already serves this store" in out
        assert "http://127.0.0.1:5000/#/experiments/1/runs" in out and "serving" not in out
    elif explicit:
        assert started == [] and out == ""
        assert err.count("\n") == 1 and "port 5000 is taken by a server that is not on this store" in err
    else:
        [command] = started
        assert _port(command) != 5000
        assert f"port 5000 is taken by another server; using port {_port(command)}" in err
        assert f"http://127.0.0.1:{_port(command)}/#/experiments/1/runs" in out and ":5000/" not in out


def test_port_0_serves_on_a_free_port(tmp_path, capsys, monkeypatch, started):
    db = _store(tmp_path)
    monkeypatch.setattr(ui, "port_in_use", lambda host, port: pytest.fail("a chosen port is not probed"))
    assert ui.run(["--tracking-uri", f"sqlite:///{db}", "--no-browser", "--port", "0"]) == 0
    [command] = started
    assert _port(command) > 0 and f":{_port(command)}/#/experiments/1/runs" in capsys.readouterr().out


def test_a_host_with_no_port_to_serve_on_is_one_line(tmp_path, capsys, started):
    db = _store(tmp_path)
    host = "192.0.2.1"  # TEST-NET-1: an address of no interface here (no name to look up)
    assert ui.run(["--tracking-uri", f"sqlite:///{db}", "--no-browser", "--port", "0", "--host", host]) == 2
    err = capsys.readouterr().err
    assert started == [] and err.count("\n") == 1 and f"--host {host}: no port to serve on there" in err


class _Mlflow(http.server.BaseHTTPRequestHandler):
    """MLflow's REST API as ``ragbench ui`` reads it from a tracking server: the probe, the experiment (with a
    saved sweep view) and the latest sweep."""

    searched: list[dict[str, object]] = []

    def _json(self, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.startswith("/api/2.0/mlflow/experiments/search"):
            self._json({"experiments": []})
        else:
            assert self.path == "/api/2.0/mlflow/experiments/get-by-name?experiment_name=team"
            self._json({"experiment": {"experiment_id": "7", "lifecycle_stage": "active", "tags": [
                {"key": "mlflow.sharedViewState.ragbench-sweep-p2", "value": "{}"}]}})

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).searched.append(body)
        self._json({"runs": [{"info": {"run_id": "p2"}}]})

    def log_message(self, *args: object) -> None:
        pass


def test_a_tracking_server_is_opened_on_its_own_pages_with_no_local_server(capsys, monkeypatch):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Mlflow)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    monkeypatch.setattr(ui.subprocess, "Popen", lambda *a, **k: pytest.fail("started a local server"))
    try:
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        assert ui.run(["--tracking-uri", base + "/", "--experiment", "team", "--no-browser"]) == 0
    finally:
        httpd.shutdown()
        httpd.server_close()
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{base} is a tracking server: no local server started"
    assert out[2] == f"latest sweep p2, its jobs: {ui.view_url(base, '7', 'ragbench-sweep-p2')}"
    assert out[3] == f"its report: {ui.parent_url(base, '7', 'p2')}"
    assert _Mlflow.searched[0]["filter"] == "tags.`ragbench.role` = 'sweep'"
    assert max(len(line) for line in out if not line.startswith(("MLflow runs", "latest", "its"))) <= 80


def test_an_unreachable_tracking_server_is_one_line(capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert ui.run(["--tracking-uri", f"http://127.0.0.1:{port}", "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing listens there (connection refused)" in err
