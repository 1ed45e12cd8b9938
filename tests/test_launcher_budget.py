"""Issue 39.4: the budget is a ceiling for the sweep under launchers that run jobs in worker processes.
Real sweeps (``python -m ragbench -m``) with ``hydra/launcher=joblib hydra.launcher.n_jobs=2`` and
``hydra/launcher=ray_local`` against the loopback server, which counts the requests it gets: the two
workers reserve in one file (``ragbench.budget_file``), so ``budget.max_calls=N`` sends exactly N
requests in all, and ``max_usd`` is not passed, where each worker used to hold its own budget (up to
twice the ceiling with two workers). Each job alone asks for fewer requests than the ceiling, so both
workers must send for the sweep to reach it."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.fixtures.llm_server import LLMServer
from tests.test_launchers import _ray_missing, sweep_runs

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
CASES = 5  # a job sends its preflight and one generation request per case: 6, under N
N = 8
JOBLIB = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]


def _sweep(server: LLMServer, work: Path, *extra: str, env: dict[str, str] | None = None,
           ) -> subprocess.CompletedProcess:
    args = ["-m", "retrieval=bm25", "dataset=qasper", f"dataset.sample_size={CASES}", "retrieval.topk=1,2",
            "llm=openai_compatible", "llm.model=openai/gpt-4o-mini", f"llm.api_base={server.url}",
            "llm.max_concurrency=2", "llm.max_tokens=50", "llm.num_retries=0", "judge=lexical",
            f"cache.dir={work}/cache", *extra]
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-test",
                "LITELLM_LOCAL_MODEL_COST_MAP": "True", "MLFLOW_DISABLE_TELEMETRY": "true", **(env or {})}
    return subprocess.run([sys.executable, "-m", "ragbench", *args], cwd=work, env=full_env,
                          capture_output=True, text=True, timeout=900, check=False)


def _children(work: Path) -> list:
    return sweep_runs(f"sqlite:///{work}/mlruns/mlflow.db")[2]


@pytest.fixture(scope="module")
def server():
    with LLMServer() as srv:
        srv.delay_s = 0.1  # replies overlap: both workers have requests in flight at the stop
        yield srv


@pytest.fixture(scope="module")
def max_calls_sweep(server, tmp_path_factory):
    """The joblib sweep at budget.max_calls=N: (the process, the requests the server got, its job runs)."""
    work = tmp_path_factory.mktemp("calls")
    server.reset()
    proc = _sweep(server, work, *JOBLIB, f"budget.max_calls={N}")
    return proc, server.count, _children(work)


def test_joblib_workers_send_exactly_max_calls_requests_in_all(max_calls_sweep):
    proc, sent, children = max_calls_sweep
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"sweep stopped by budget: budget.max_calls={N} reached" in proc.stderr
    assert sent == N  # the server's own count: exactly N requests, from the two workers together
    calls = {c.data.tags["ragbench.owner"]: c.data.metrics["llm/calls_total"] for c in children}
    assert len(calls) == 2 and all(v > 0 for v in calls.values()), calls  # two processes, both sent
    assert sum(calls.values()) == N  # what the jobs' records booked is what the server got
    assert {c.info.status for c in children} == {"KILLED"}  # each was stopped part way by the sweep's budget
    assert all(c.data.tags["ragbench.stopped_by_budget"].startswith(f"budget.max_calls={N}")
               for c in children)
    print(f"\njoblib n_jobs=2, budget.max_calls={N}: the server got {sent} requests; per worker {calls}")


def test_joblib_workers_keep_under_max_usd_in_all(max_calls_sweep, server, tmp_path):
    _, sent, children = max_calls_sweep
    per_request = sum(c.data.metrics["cost/usd_total"] for c in children) / sent
    assert per_request > 0  # gpt-4o-mini is priced in litellm's offline cost map
    cap = N * per_request  # about N requests' worth; one job alone asks for less, two for more
    server.reset()
    proc = _sweep(server, tmp_path, *JOBLIB, f"budget.max_usd={cap!r}")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"sweep stopped by budget: budget.max_usd={cap:g} reached" in proc.stderr
    jobs = _children(tmp_path)
    spent = sum(c.data.metrics["cost/usd_total"] for c in jobs)
    assert 0 < spent <= cap
    assert sum(c.data.metrics["llm/calls_total"] for c in jobs) == server.count
    assert len({c.data.tags["ragbench.owner"] for c in jobs}) == 2
    print(f"\njoblib n_jobs=2, budget.max_usd={cap:.6f}: spent {spent:.6f} in {server.count} requests")


@pytest.mark.ray
@pytest.mark.skipif(_ray_missing() and os.environ.get("RAGBENCH_REQUIRE_RAY") != "1",
                    reason="needs the ray extra: pip install -e '.[ray]' (CI installs it)")
def test_ray_workers_send_exactly_max_calls_requests_in_all(server, tmp_path):
    ray_tmp = Path(tempfile.mkdtemp(prefix="rbray-"))  # short: Ray's socket paths must fit 107 characters
    env = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN": secrets.token_hex(32), "RAY_TMPDIR": str(ray_tmp)}
    server.reset()
    try:
        proc = _sweep(server, tmp_path, "hydra/launcher=ray_local", "hydra.launcher.ray.init.num_cpus=2",
                      f"budget.max_calls={N}", env=env)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"sweep stopped by budget: budget.max_calls={N} reached" in proc.stderr
    assert server.count == N
    children = _children(tmp_path)
    assert sum(c.data.metrics["llm/calls_total"] for c in children) == N
    assert len({c.data.tags["ragbench.owner"] for c in children}) == 2
