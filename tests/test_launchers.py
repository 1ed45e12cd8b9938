"""Launchers and remote tracking, as users run them: ``python -m ragbench -m ...`` in a subprocess with joblib,
a local Ray, a ``mlflow server`` on 127.0.0.1, and the Optuna search example."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
# bm25 needs no embedding model: these tests are about launching and logging, not retrieval quality
SMALL = ["dataset=qasper", "dataset.sample_size=3", "retrieval=bm25"]
CHILD_ARTIFACTS = {"cases.jsonl", "cases_table.json", "run.json"}
CORE_METRICS = {"retrieval/mrr_at_10", "retrieval/hit_at_5", "context/evidence_text_recall", "answer/f1", "answer/em",
                "cases/total", "cases/failed"}


def ragbench(args: list[str], cwd: Path, env: dict[str, str] | None = None,
             timeout: int = 600) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "ragbench", *args], check=False, cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def sweep_runs(uri: str) -> tuple[object, list, list]:
    """(client, parent runs, child runs) of the ``ragbench`` experiment at ``uri``."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("ragbench")
    assert exp is not None, f"no ragbench experiment at {uri}"
    all_runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in all_runs if r.data.tags.get("ragbench.role") == "sweep"]
    children = [r for r in all_runs if r.data.tags.get("ragbench.role") == "job"]
    assert len(parents) + len(children) == len(all_runs)
    return client, parents, children


def assert_complete_sweep(client, parents: list, children: list, n_jobs: int) -> None:
    """One FINISHED parent, ``n_jobs`` FINISHED children under it, each with all metrics and artifacts."""
    assert len(parents) == 1, [p.info.run_name for p in parents]
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert len(children) == n_jobs, sorted(c.info.run_name for c in children)
    assert all(c.info.status == "FINISHED" for c in children)
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    for c in children:
        assert c.data.params["dataset.name"] == "qasper"
        assert CHILD_ARTIFACTS <= {a.path for a in client.list_artifacts(c.info.run_id)}
        # every metric the job computed (its record, run.json) reached the store, with its value
        with tempfile.TemporaryDirectory() as tmp:
            summary = json.loads(Path(client.download_artifacts(c.info.run_id, "run.json", tmp)).read_text())
        computed = summary["metrics"]
        assert CORE_METRICS <= set(computed)
        missing = set(computed) - set(c.data.metrics)
        assert not missing, f"run {c.info.run_name} lost metrics {sorted(missing)[:5]}"
        assert all(c.data.metrics[k] == pytest.approx(v, nan_ok=True) for k, v in computed.items())
    assert parent.data.metrics["sweep/jobs"] == n_jobs
    assert parent.data.metrics["sweep/failed_jobs"] == 0


def test_joblib_parallel_jobs_lose_no_run(tmp_path):
    """n_jobs=2 processes write to one sqlite store at once: 4 complete children, 1 parent, nothing lost."""
    # dense retrieval: each job loads and runs the embedder, long enough that the two workers' jobs overlap
    proc = ragbench(["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", *SMALL, "retrieval=dense",
                     "retrieval.topk=1,2,3,4"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "database is locked" not in proc.stderr
    client, parents, children = sweep_runs(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    assert_complete_sweep(client, parents, children, 4)
    assert sorted(c.data.params["retrieval.topk"] for c in children) == ["1", "2", "3", "4"]
    # really parallel: the jobs ran in two worker processes (each run is tagged host:pid:start by the process
    # that opened it). Not a time overlap: on a loaded machine one worker may finish a job before the other
    # worker has imported ragbench, and the jobs' MLflow spans then need not intersect.
    owners = {c.data.tags["ragbench.owner"] for c in children}
    assert len(owners) == 2, owners
    assert "sweep: 4 jobs" in proc.stdout


def _ray_missing() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is None or importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is None


# The default dev install leaves Ray out (about 280 MB). CI installs the ray extra and sets
# RAGBENCH_REQUIRE_RAY=1, so there a missing Ray fails this test instead of skipping it.
@pytest.mark.ray
@pytest.mark.skipif(_ray_missing() and os.environ.get("RAGBENCH_REQUIRE_RAY") != "1",
                    reason="needs the ray extra: pip install -e '.[ray]' (CI installs it)")
def test_ray_local_launcher(tmp_path):
    """hydra-ray-launcher on a Ray started by the sweep, bound to 127.0.0.1, no dashboard, nothing written to ~."""
    ray_tmp = Path(tempfile.mkdtemp(prefix="rbray-"))  # short: Ray's socket paths must fit 107 characters
    token_file = Path.home() / ".ray" / "auth_token"
    had_token = token_file.exists()
    env = {
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # Ray's single-machine mode: every address is 127.0.0.1
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),  # given, so Ray does not write one to ~/.ray
        "RAY_TMPDIR": str(ray_tmp),
    }
    try:
        proc = ragbench(["-m", "hydra/launcher=ray_local", *SMALL, "retrieval.topk=1,2"], tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "Started a local Ray instance" in proc.stderr
        assert re.search(r"\(_run_job pid=\d+\)", proc.stdout), "the jobs did not run in Ray workers"
        client, parents, children = sweep_runs(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
        assert_complete_sweep(client, parents, children, 2)
        logs = list(ray_tmp.glob("ray/session_*/logs/raylet.out")) + list(ray_tmp.glob("ray/session_*/logs/gcs_*"))
        assert logs, f"no Ray session logs under {ray_tmp}"
        addresses = {m for p in logs for m in re.findall(r"\b(\d{1,3}(?:\.\d{1,3}){3}):\d+", p.read_text())}
        assert addresses == {"127.0.0.1"}, f"Ray listened outside the loopback: {addresses}"
        assert had_token or not token_file.exists()
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_submitit_local_launcher(tmp_path):
    """hydra-submitit-launcher's local executor: the code path of hydra/launcher=submitit_slurm without sbatch
    (jobs are pickled, run in fresh processes and find the sweep's parent run through the sweep folder)."""
    proc = ragbench(["-m", "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10", *SMALL,
                     "retrieval.topk=1,2"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, parents, children = sweep_runs(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    assert_complete_sweep(client, parents, children, 2)
    assert len(list(tmp_path.glob("multirun/*/*/.submitit/*/*_result.pkl"))) == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def mlflow_server(tmp_path):
    """A real ``mlflow server`` on 127.0.0.1 (sqlite backend, artifacts served from a local folder)."""
    port = _free_port()
    store = tmp_path / "server"
    store.mkdir()
    log_file = (store / "server.log").open("w")
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "MLFLOW_DISABLE_TELEMETRY": "true"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{store}/mlflow.db",
         "--artifacts-destination", str(store / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        cwd=store, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while True:
            assert proc.poll() is None, (store / "server.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert time.time() < deadline, "mlflow server did not come up in 180 s"
            time.sleep(0.5)
        yield url, store
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the server, its uvicorn worker: the group we started
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        log_file.close()


def test_sweep_against_a_remote_mlflow_server(tmp_path, mlflow_server):
    url, store = mlflow_server
    work = tmp_path / "work"
    work.mkdir()
    proc = ragbench(["-m", f"tracking.uri={url}", *SMALL, "retrieval.topk=1,2"], work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, parents, children = sweep_runs(url)
    assert_complete_sweep(client, parents, children, 2)
    assert not (work / "mlruns").exists()  # nothing fell back to the local sqlite store
    for c in children:  # artifacts went through the server into its own folder
        assert c.info.artifact_uri.startswith("mlflow-artifacts:")
        stored = store / "artifacts" / c.info.experiment_id / c.info.run_id / "artifacts"
        assert CHILD_ARTIFACTS <= {p.name for p in stored.iterdir()}
    table = Path(client.download_artifacts(parents[0].info.run_id, "sweep_comparison.json", str(tmp_path)))
    assert table.exists()


def test_optuna_search_example_runs_two_trials(tmp_path):
    """The shipped experiment, shrunk to two trials: each job hands its objective back to the sweeper."""
    proc = ragbench(["-m", "experiment=optuna_search", "dataset=qasper", "dataset.sample_size=3",
                     "hydra.sweeper.n_trials=2"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, parents, children = sweep_runs(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    assert_complete_sweep(client, parents, children, 2)
    results_files = list(tmp_path.glob("multirun/*/*/optimization_results.yaml"))
    assert len(results_files) == 1
    results = yaml.safe_load(results_files[0].read_text())
    assert set(results["best_params"]) == {"retrieval", "retrieval.topk", "expander.parent_depth", "reranker"}
    # the best value Optuna saw is the objective (answer/f1) of the best child run
    assert results["best_value"] == pytest.approx(max(c.data.metrics["answer/f1"] for c in children))
    trials = [dict(o.split("=", 1) for o in yaml.safe_load(p.read_text()))
              for p in sorted(tmp_path.glob("multirun/*/*/[01]/.hydra/overrides.yaml"))]
    assert len(trials) == 2
    assert all({"retrieval", "reranker", "retrieval.topk", "expander.parent_depth"} <= set(t) for t in trials)
