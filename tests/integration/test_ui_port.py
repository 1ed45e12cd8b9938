"""``ragbench ui`` against a real MLflow server already on its port (issue 45.4): a server of another store is
never taken for its own (one line, nothing printed into that store), one on this store is used as it is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ragbench import ui
from ragbench.tracking.mlflow_tracker import MlflowTracker

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _store(folder: Path) -> str:
    """A store with one sweep run (what ``ragbench ui`` opens on); returns its URI."""
    uri = f"sqlite:///{folder}/mlruns/mlflow.db"
    tracker = MlflowTracker(uri=uri, artifact_root=str(folder / "mlruns" / "artifacts"))
    tracker.end_run(tracker.start_run(run_name="sweep", tags={"ragbench.role": "sweep"}), "FINISHED")
    return uri


@pytest.fixture
def other_server(tmp_path):
    """The lean MLflow server on another folder's store, on a free port: (its store URI, its port)."""
    uri, port = _store(tmp_path / "other"), ui.free_port("127.0.0.1")
    proc = subprocess.Popen(ui.server_command(uri, "127.0.0.1", port), env=ui.server_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                break
        except OSError:
            time.sleep(0.3)
    try:
        assert proc.poll() is None, "the MLflow server did not start"
        yield uri, port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def _ui(uri: str, port: int, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragbench", "ui", "--tracking-uri", uri, "--port", str(port),
                           "--no-browser"], cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=300)


def test_a_port_served_by_another_stores_server_is_one_line(tmp_path, other_server):
    theirs, port = other_server
    mine = _store(tmp_path / "mine")
    proc = _ui(mine, port, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout == ""  # no URL into the other store, no "serving"
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"port {port} is taken by a server that is not on this store" in lines[0]

    same = _ui(theirs, port, tmp_path)  # that server's own store: its URLs, no second server
    assert same.returncode == 0, same.stderr
    assert f"http://127.0.0.1:{port} already serves this store" in same.stdout
    assert f"http://127.0.0.1:{port}/#/experiments/1/runs" in same.stdout and "serving" not in same.stdout
