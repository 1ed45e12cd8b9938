"""``ragbench ui`` (also ``python -m ragbench.ui``): the lean MLflow server on the jobs' store, opened on the runs.

MLflow 3 opens an experiment on its GenAI overview ("Traces 0") unless the URL names the machine-learning
workflow; ``runs_url`` is the runs view with it selected. A sweep saves its own view on the experiment (MLflow's
shared-view tag: its jobs, best ``headline/answer_f1`` first, the varying params and headline metrics as
columns) and prints its ``view_url`` at the end; ``sweep_url`` is the same without the columns (older sweeps).
``traces_url`` is the experiment's Traces tab filtered to one sweep's traces (its URL ``tag`` parameter).
"""

from __future__ import annotations

import argparse
import errno
import functools
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ragbench.errors import RagbenchError, coded
from ragbench.tracking import reach
from ragbench.tracking.store import sqlite_path, tracking_defaults

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 5000
WORKFLOW = "workflowType=machine_learning"  # MLflow 3's "Model training" switch, as a URL parameter
ORDER = "orderByKey=" + quote("metrics.`headline/answer_f1`", safe="") + "&orderByAsc=false"
START_TIMEOUT_S = 90.0
MAX_PORT = 65535


def base_url(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> str:
    return f"http://{host}:{port}"


def runs_url(base: str, experiment_id: str) -> str:
    """The experiment's runs view with the machine-learning workflow selected (not the GenAI overview)."""
    return f"{base}/#/experiments/{experiment_id}/runs?{WORKFLOW}"


def sweep_url(base: str, experiment_id: str, parent_run_id: str) -> str:
    """The runs view narrowed to the jobs of one sweep (the children of ``parent_run_id``), best F1 first."""
    flt = quote(f"tags.mlflow.parentRunId = '{parent_run_id}'", safe="")
    return f"{runs_url(base, experiment_id)}&searchFilter={flt}&{ORDER}"


VIEW_TAG = "mlflow.sharedViewState."  # an experiment tag MLflow's runs view loads as a shared view
NAME_COLUMN = "attributes.`Run Name`"
VIEW_METRICS = ("headline/answer_f1", "headline/hit_at_topk", "headline/mrr_at_10", "headline/mrr",
                "headline/context_evidence_recall",
                "headline/judge_accuracy", "headline/answer_em", "headline/failure_rate")


def view_key(parent_run_id: str) -> str:
    return f"ragbench-sweep-{parent_run_id}"


def sweep_view(parent_run_id: str, params: Sequence[str], metrics: Sequence[str]) -> str:
    """The runs view of one sweep as MLflow's shared-view state (JSON): its jobs only, best F1 first, the
    params that differ between them and the headline metrics as columns (none of MLflow's ~800 others)."""
    columns = [f"metrics.`{m}`" for m in VIEW_METRICS if m in metrics] + [f"params.`{p}`" for p in params]
    return json.dumps({"searchFilter": f"tags.mlflow.parentRunId = '{parent_run_id}'",
                       "orderByKey": "metrics.`headline/answer_f1`", "orderByAsc": False,
                       "selectedColumns": columns, "columnOrder": [NAME_COLUMN, *columns],
                       "columnWidths": {NAME_COLUMN: 260, **{c: 120 for c in columns}}, "viewMaximized": True})


def view_url(base: str, experiment_id: str, key: str) -> str:
    """The runs view in the state saved under ``key`` (``save_sweep_view``)."""
    return f"{runs_url(base, experiment_id)}&viewStateShareKey={quote(key, safe='')}"


def save_sweep_view(client: Any, experiment_id: str, parent_run_id: str, params: Sequence[str],
                    metrics: Sequence[str]) -> str:
    """Stores the sweep's view on the experiment (a tag); returns its key for ``view_url``."""
    key = view_key(parent_run_id)
    client.set_experiment_tag(experiment_id, VIEW_TAG + key, sweep_view(parent_run_id, params[:8], metrics))
    return key


def parent_url(base: str, experiment_id: str, parent_run_id: str) -> str:
    """The sweep's report (``compare/report.html``, drawn in MLflow's artifact pane) on its parent run, whose
    artifacts also hold ``runs.csv``."""
    return f"{base}/#/experiments/{experiment_id}/runs/{parent_run_id}/artifacts/compare/report.html?{WORKFLOW}"


SWEEP_TAG = "ragbench.sweep"  # a trace's tag: its sweep's parent run id (ragbench.tracking.traces)
ALL_TIME = "startTimeLabel=ALL"  # the Traces tab shows the last 7 days unless told otherwise


def traces_filter(parent_run_id: str) -> str:
    """The ``tag`` URL parameter of MLflow 3's Traces tab (``key=value``, each side URL-encoded, as its tag
    chips write it): the traces tagged ``ragbench.sweep = <parent_run_id>``."""
    return f"{quote(SWEEP_TAG, safe='')}={quote(parent_run_id, safe='')}"


def traces_search(parent_run_id: str) -> str:
    """The same filter as a trace search string (the Traces tab's request; ``mlflow.search_traces``)."""
    return f"tags.`{SWEEP_TAG}` = '{parent_run_id}'"


def traces_url(base: str, experiment_id: str, parent_run_id: str | None = None) -> str:
    """The experiment's Traces tab over all time: one trace per question of each job
    (``ragbench.tracking.traces``), each score an assessment column; with ``parent_run_id``, only that sweep's
    traces (a tag filter chip, removable in the page)."""
    url = f"{base}/#/experiments/{experiment_id}/traces?{ALL_TIME}"
    return f"{url}&tag={quote(traces_filter(parent_run_id), safe='')}" if parent_run_id else url


def server_command(uri: str, host: str, port: int) -> list[str]:
    """The lean server: one web worker, no job runner (``mlflow ui``'s default is ~15 processes, 4 GiB)."""
    mlflow = shutil.which("mlflow") or str(Path(sys.executable).with_name("mlflow"))
    return [mlflow, "ui", "--backend-store-uri", uri, "--workers", "1", "--host", host, "--port", str(port)]


def server_env() -> dict[str, str]:
    return {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true",
            "DO_NOT_TRACK": "1"}


def store_ids(db: Path, experiment: str) -> tuple[str | None, str | None, set[str]]:
    """(experiment id, latest sweep parent run id, the keys of the experiment's saved views) read from a
    sqlite store, without importing MLflow."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        row = con.execute("SELECT experiment_id FROM experiments WHERE name = ? AND lifecycle_stage = 'active'",
                          (experiment,)).fetchone()
        if row is None:
            return None, None, set()
        views = {str(k)[len(VIEW_TAG):] for (k,) in con.execute(
            "SELECT key FROM experiment_tags WHERE experiment_id = ? AND key LIKE ?", (row[0], VIEW_TAG + "%"))}
        sweep = con.execute(
            "SELECT r.run_uuid FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid WHERE r.experiment_id = ? "
            "AND r.lifecycle_stage = 'active' AND t.key = 'ragbench.role' AND t.value = 'sweep' "
            "ORDER BY r.start_time DESC LIMIT 1", (row[0],)).fetchone()
        return str(row[0]), (str(sweep[0]) if sweep else None), views
    finally:
        con.close()


def experiment_stamp(db: Path, experiment_id: str) -> dict[str, str]:
    """The experiment's name and creation time in a sqlite store: what a server must report for it to be
    serving this store (``serves``); two stores' experiments of one name were created at other times."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        cursor = con.execute("SELECT * FROM experiments WHERE experiment_id = ?", (experiment_id,))
        row = dict(zip([c[0] for c in cursor.description], cursor.fetchone() or (), strict=False))
        return {key: str(row[key]) for key in ("name", "creation_time") if key in row}  # old schemas: no time
    finally:
        con.close()


def serves(base: str, experiment_id: str, stamp: dict[str, str]) -> bool | None:
    """Whether the MLflow server at ``base`` serves the store of ``stamp`` (``experiment_stamp``): its
    experiment ``experiment_id`` has that name and creation time (MLflow's REST API). None: it refused to
    say (403: a host outside MLflow's allowed hosts; its ``/health`` answers every host)."""
    url = f"{base}/api/2.0/mlflow/experiments/get?experiment_id={quote(experiment_id, safe='')}"
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            found = json.load(reply).get("experiment") or {}
    except urllib.error.HTTPError as exc:
        return None if exc.code == 403 else False
    except (urllib.error.URLError, OSError, ValueError, AttributeError):
        return False
    return all(str(found.get(key)) == value for key, value in stamp.items())


def _address(host: str, port: int) -> tuple[int, Any]:
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    return family, address


def port_in_use(host: str, port: int) -> bool:
    """Whether a server already listens on ``host:port``: it accepts a connection, or the address cannot be
    bound (another reason a bind fails, a host that is not this machine's, is left to the server to say)."""
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        pass
    try:
        family, address = _address(host, port)
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is free
            sock.bind(address)
    except OSError as exc:
        return exc.errno == errno.EADDRINUSE
    return False


def free_port(host: str) -> int:
    """A port on ``host`` that no server listens on now (the system's pick)."""
    family, address = _address(host, 0)
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind(address)
        return int(sock.getsockname()[1])


def wait_until_up(base: str, proc: subprocess.Popen, timeout: float = START_TIMEOUT_S,
                  ours: Callable[[], bool | None] | None = None) -> bool:
    """True once the server answers ``/health`` (and ``ours()``: the answer is from the server started on this
    store, not another one on the port); False when it exits or does not answer in ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as reply:
                if reply.status == 200 and proc.poll() is None and (ours is None or ours() is not False):
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.3)
    return False


def open_in_browser(url: str) -> bool:
    """Opens ``url`` where a browser exists (never on a headless machine: ``webbrowser`` finds none)."""
    import webbrowser

    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or sys.platform in ("darwin", "win32")):
        return False
    try:
        return webbrowser.get().open(url)
    except webbrowser.Error:
        return False


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragbench ui", description="Start the lean MLflow server on the jobs' store "
                                "and print (and open) the runs view of the ragbench experiment.")
    p.add_argument("--tracking-uri", help="sqlite store (default: tracking.uri of conf/tracking/mlflow.yaml, "
                                          "sqlite:///mlruns/mlflow.db, relative to this folder), or a "
                                          "tracking server's http(s) URL: its pages, no local server")
    p.add_argument("--experiment", help="MLflow experiment (default: the jobs' tracking.experiment, ragbench)")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to serve on ({DEFAULT_HOST})")
    p.add_argument("--port", type=int, help=f"port ({DEFAULT_PORT}, or a free one when another server "
                                            "has it; 0: a free one)")
    p.add_argument("--sweep", metavar="PARENT_RUN_ID", help="also print this sweep's jobs view (default: the latest)")
    p.add_argument("--no-browser", action="store_true", help="print the URL only")
    return p


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM ends the server like Ctrl-C (its process group is its own)


def run(argv: Sequence[str] | None = None) -> int:
    """Starts the server, prints the URLs, serves until Ctrl-C or SIGTERM; returns the exit code."""
    args = parser().parse_args(argv)
    default_uri, default_experiment = tracking_defaults()
    uri, experiment = args.tracking_uri or default_uri, args.experiment or default_experiment
    if reach.is_server(uri):  # a team's server: its own pages, no local server
        return _remote(uri, experiment, args.sweep, browse=not args.no_browser)
    db = sqlite_path(uri)
    if db is None:
        print(f"ragbench ui: error: --tracking-uri={reach.public_uri(uri)} is not a sqlite store; fix: start "
              "`mlflow server --backend-store-uri` on it and pass the server's http:// URL", file=sys.stderr)
        return 2
    if not db.exists():
        print(f"ragbench ui: error: no MLflow store at {db.resolve()}; run from the folder the jobs ran in "
              "(or pass --tracking-uri), after a job or sweep (python -m ragbench ...)", file=sys.stderr)
        return 2
    if args.port is not None and not 0 <= args.port <= MAX_PORT:
        print(f"ragbench ui: error: --port {args.port} is not a port; pass one from 1 to {MAX_PORT} "
              "(0: a free one)", file=sys.stderr)
        return 2
    try:
        exp_id, latest, views = store_ids(db, experiment)
        stamp = experiment_stamp(db, exp_id) if exp_id is not None else {}
    except sqlite3.Error as exc:  # a text file, another program's database, a folder
        print(f"ragbench ui: error: {db.resolve()} is not an MLflow store ({exc}); pass --tracking-uri "
              "sqlite:///<the mlflow.db the jobs wrote>", file=sys.stderr)
        return 2
    if exp_id is None:
        print(f"ragbench ui: error: no experiment {experiment!r} in {db}; pass --experiment "
              "(the jobs' tracking.experiment)", file=sys.stderr)
        return 2
    urls = functools.partial(_print_urls, exp_id=exp_id, experiment=experiment, sweep=args.sweep or latest,
                             chosen=bool(args.sweep), views=views, browse=not args.no_browser)
    port = DEFAULT_PORT if args.port is None else args.port
    try:
        if port == 0:
            port = free_port(args.host)
        elif port_in_use(args.host, port):
            if serves(base_url(args.host, port), exp_id, stamp) is True:  # a ragbench ui (or mlflow ui) on it
                print(f"{base_url(args.host, port)} already serves this store; not starting another", flush=True)
                urls(base_url(args.host, port))
                return 0
            if args.port is not None:
                print(f"ragbench ui: error: port {port} is taken by a server that is not on this store; pass "
                      "another --port (0: a free one)", file=sys.stderr)
                return 1
            port, taken = free_port(args.host), port
            print(f"ragbench ui: port {taken} is taken by another server; using port {port}", file=sys.stderr)
    except OSError as exc:  # a host name that does not resolve, an address of another machine
        print(f"ragbench ui: error: --host {args.host}: no port to serve on there ({exc}); pass --host "
              f"{DEFAULT_HOST}", file=sys.stderr)
        return 2
    base = base_url(args.host, port)
    before = signal.signal(signal.SIGTERM, _stop)
    proc = subprocess.Popen(server_command(uri, args.host, port), env=server_env(), stdin=subprocess.DEVNULL,
                            stdout=sys.stderr, start_new_session=True)  # the server's log on stderr: stdout is ours
    try:
        if not wait_until_up(base, proc, ours=lambda: serves(base, exp_id, stamp)):
            code = proc.poll()
            print(f"ragbench ui: error: the MLflow server did not start on {base} "
                  f"({'exit ' + str(code) if code is not None else 'no answer in ' + str(int(START_TIMEOUT_S)) + ' s'}"
                  f"); is port {port} in use? pass another --port (0: a free one)", file=sys.stderr)
            return 1
        urls(base)
        print("serving; Ctrl-C stops the server", flush=True)
        return proc.wait() or 0
    except KeyboardInterrupt:
        return 0
    finally:
        signal.signal(signal.SIGTERM, before)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def _rest(base: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """One call of the server's REST API (``base`` answered ``reach.check`` just before): its JSON, or
    ``{}`` where the server says the thing does not exist (404)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{base}/api/2.0/mlflow/{path}", data=data,
                                     method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json", **reach.headers()})
    try:
        with urllib.request.urlopen(request, timeout=reach.default_timeout()) as reply:
            found = json.load(reply)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return {}
        raise RagbenchError(f"--tracking-uri={reach.public_uri(base)}: the server failed on {path} (HTTP "
                            f"{exc.code}); fix: read the server's log") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise RagbenchError(f"--tracking-uri={reach.public_uri(base)}: {path}: {exc}; fix: check the server "
                            "is up and reachable") from None
    return found if isinstance(found, dict) else {}


def server_ids(base: str, experiment: str) -> tuple[str | None, str | None, set[str]]:
    """``store_ids`` of a tracking server, through its REST API (no MLflow import)."""
    found = _rest(base, f"experiments/get-by-name?experiment_name={quote(experiment, safe='')}")
    exp = found.get("experiment") or {}
    if not exp.get("experiment_id") or exp.get("lifecycle_stage", "active") != "active":
        return None, None, set()
    exp_id = str(exp["experiment_id"])
    views = {str(t.get("key"))[len(VIEW_TAG):] for t in exp.get("tags") or () if
             str(t.get("key", "")).startswith(VIEW_TAG)}
    runs = _rest(base, "runs/search", {"experiment_ids": [exp_id], "max_results": 1,
                                       "filter": "tags.`ragbench.role` = 'sweep'",
                                       "order_by": ["attributes.start_time DESC"]}).get("runs") or []
    latest = str(runs[0]["info"]["run_id"]) if runs else None
    return exp_id, latest, views


def _remote(uri: str, experiment: str, sweep: str | None, *, browse: bool) -> int:
    """``ragbench ui`` on a tracking server: no local server; the server's own pages, printed (and opened)."""
    base = uri.rstrip("/")
    shown = reach.public_uri(base)
    try:
        reach.check(uri, reach.default_timeout(), key="--tracking-uri")
        exp_id, latest, views = server_ids(base, experiment)
    except RagbenchError as exc:
        print(f"ragbench ui: error: {coded(exc)}", file=sys.stderr)
        return 2
    if exp_id is None:
        print(f"ragbench ui: error: no experiment {experiment!r} on {shown}; pass --experiment (the jobs' "
              "tracking.experiment)", file=sys.stderr)
        return 2
    print(f"{shown} is a tracking server: no local server started", flush=True)
    _print_urls(shown, exp_id=exp_id, experiment=experiment, sweep=sweep or latest, chosen=bool(sweep),
                views=views, browse=browse)
    return 0


def _print_urls(base: str, *, exp_id: str, experiment: str, sweep: str | None, chosen: bool, views: set[str],
                browse: bool) -> None:
    """The runs view, the sweep's jobs and its report on ``base``; the jobs' view opened in a browser."""
    url = runs_url(base, exp_id)
    print(f"MLflow runs of experiment {experiment!r}: {url}", flush=True)
    jobs = url
    if sweep:
        key = view_key(sweep)
        jobs = view_url(base, exp_id, key) if key in views else sweep_url(base, exp_id, sweep)
        print(f"{'sweep' if chosen else 'latest sweep'} {sweep}, its jobs: {jobs}")
        print(f"its report: {parent_url(base, exp_id, sweep)}", flush=True)
        print(f"its traces (one per question): {traces_url(base, exp_id, sweep)}", flush=True)
    else:
        print(f"traces (one per question of each job): {traces_url(base, exp_id)}", flush=True)
    if browse:
        open_in_browser(jobs)


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point."""
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
