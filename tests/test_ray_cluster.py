"""Issue 39.5: a real two-node Ray cluster on this machine (``ray start --head``, then a second ``ray start
--address`` with its own temp dir and a resource of its own), and sweeps through Hydra's Ray launcher
pointed at it (``hydra/launcher=ray_cluster hydra.launcher.ray.init.address=<head>``, Hydra's ``ray``
launcher with what a running cluster needs). The first sweep's two jobs
run one on each node (each node has one CPU, each job asks for one), which tells from the worker logs in
each node's own temp dir; the second sweep (``resume=false``, the same shared ``cache.dir``) runs the
same jobs again and reads every stage from the entries the first sweep's jobs wrote, on either node.

The cluster is stopped by ending the two ``ray start --block`` process groups this test started (``ray
stop`` would end every Ray process of the machine, other tests' too)."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_launchers import _free_port, _ray_missing, sweep_runs

pytestmark = [pytest.mark.slow, pytest.mark.ray,
              pytest.mark.skipif(_ray_missing() and os.environ.get("RAGBENCH_REQUIRE_RAY") != "1",
                                 reason="needs the ray extra: pip install -e '.[ray]' (CI installs it)")]
ROOT = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))
JOBS = ["stages=retrieval", "dataset=qasper", "dataset.sample_size=3", "retrieval=bm25", "retrieval.topk=1,2"]


def _stop(proc: subprocess.Popen) -> None:
    """Ends the process group of one ``ray start --block`` (its raylet, its workers: every Ray process
    of that node)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # a child that outlived ray start's own shutdown
    except ProcessLookupError:
        pass


def _nodes(address: str, env: dict[str, str]) -> int:
    """How many nodes ``ray status`` lists as active (0 while the head is not up)."""
    try:
        out = subprocess.run([RAY, "status", f"--address={address}"], env=env, capture_output=True, text=True,
                             timeout=60, check=False)
    except subprocess.TimeoutExpired:
        return 0
    active = out.stdout.split("Active:", 1)[-1].split("Pending:", 1)[0] if out.returncode == 0 else ""
    return len(re.findall(r"^\s*1 node_", active, re.MULTILINE))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[tuple[str, dict[str, str], Path, list[Path]]]:
    """(head address, the environment every Ray process and the sweeps share, the sweeps' folder, the
    two nodes' temp dirs)."""
    work = tmp_path_factory.mktemp("cluster")
    temps = [Path(tempfile.mkdtemp(prefix=p)) for p in ("rbh-", "rbw-")]  # short: Ray's socket paths
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}  # 0: one node
    env.update({"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
                "RAY_AUTH_TOKEN": secrets.token_hex(32),
                "PYTHONPATH": str(ROOT), "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1"})
    port = _free_port()
    address = f"127.0.0.1:{port}"
    common = ["--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats", "--block"]
    procs: list[subprocess.Popen] = []
    began = time.monotonic()

    def start(args: list[str], log: str) -> None:
        procs.append(subprocess.Popen([RAY, "start", *args, *common], cwd=work, env=env,
                                      start_new_session=True, stdout=(work / log).open("w"),
                                      stderr=subprocess.STDOUT))

    try:
        start(["--head", f"--port={port}", f"--temp-dir={temps[0]}", "--include-dashboard=false"], "head.log")
        second = ["--address", address, f"--temp-dir={temps[1]}", '--resources={"second_node": 1}']
        for want, more in ((1, second), (2, None)):
            deadline = time.monotonic() + 300
            while _nodes(address, env) < want:
                assert all(p.poll() is None for p in procs), (work / "head.log").read_text()[-2000:]
                assert time.monotonic() < deadline, f"the Ray cluster did not reach {want} nodes in 300 s"
                time.sleep(1)
            if more:
                start(more, "worker.log")
        print(f"\ntwo-node Ray cluster up in {time.monotonic() - began:.0f} s")
        yield address, env, work, temps
    finally:
        for proc in reversed(procs):
            _stop(proc)
        for t in temps:
            shutil.rmtree(t, ignore_errors=True)


def _sweep(address: str, env: dict[str, str], work: Path, *extra: str) -> subprocess.CompletedProcess:
    args = ["-m", "hydra/launcher=ray_cluster", f"hydra.launcher.ray.init.address={address}",
            "+hydra.launcher.ray.init._node_ip_address=127.0.0.1", *JOBS, f"cache.dir={work}/cache", *extra]
    return subprocess.run([sys.executable, "-m", "ragbench", *args], cwd=work, env=env, capture_output=True,
                          text=True, timeout=900, check=False)


def _node_of(pid: str, temps: list[Path]) -> int:
    """Which node (0 head, 1 second) ran the worker process ``pid``: its log is in that node's temp dir."""
    found = [i for i, t in enumerate(temps) if list(t.glob(f"session_*/logs/worker-*-{pid}.*"))]
    assert len(found) == 1, f"worker pid {pid}: logs on nodes {found}"
    return found[0]


def test_two_sweeps_share_the_cache_across_the_clusters_nodes(cluster):
    address, env, work, temps = cluster
    began = time.monotonic()
    first = _sweep(address, env, work)
    assert first.returncode == 0, first.stderr[-3000:]
    middle = time.monotonic()
    second = _sweep(address, env, work, "resume=false")  # the same jobs run again, from the shared cache
    assert second.returncode == 0, second.stderr[-3000:]
    ended = time.monotonic()
    client, parents, children = sweep_runs(f"sqlite:///{work}/mlruns/mlflow.db")
    assert len(parents) == 2 and len(children) == 4
    assert {c.info.status for c in children} == {"FINISHED"}
    by_sweep: dict[str, list] = {p.info.run_id: [] for p in parents}
    for c in children:
        by_sweep[c.data.tags["mlflow.parentRunId"]].append(c)
    sweep1, sweep2 = sorted(by_sweep.values(), key=lambda runs: min(r.info.start_time for r in runs))
    nodes = {}
    for run in (*sweep1, *sweep2):
        pid = run.data.tags["ragbench.owner"].split(":")[1]
        nodes[run.info.run_id] = _node_of(pid, temps)
    assert {nodes[r.info.run_id] for r in sweep1} == {0, 1}, "the first sweep's jobs ran on one node"
    stages = sorted({k.split("/")[1] for r in sweep1 for k in r.data.metrics if k.startswith("cache/")})
    assert stages
    report = []
    for run in sweep2:
        m = run.data.metrics
        hits = {s: m.get(f"cache/{s}/hits", 0.0) for s in stages}
        misses = {s: m.get(f"cache/{s}/misses", 0.0) for s in stages}
        assert sum(hits.values()) > 0 and sum(misses.values()) == 0, (hits, misses)
        report.append(f"node {nodes[run.info.run_id]} topk={run.data.params['retrieval.topk']}: hits {hits}")
    written = {nodes[r.info.run_id]: sum(r.data.metrics.get(f"cache/{s}/misses", 0.0) for s in stages)
               for r in sweep1}
    print(f"\nfirst sweep: entries written per node {written}; second sweep: {'; '.join(report)}")
    print(f"sweeps: {middle - began:.0f} s and {ended - middle:.0f} s")
