"""The cache under faults, through real jobs: a held lock ends in CacheLockTimeout within its bound,
cache.mode=read_only writes nothing (LLM replies included), and a library upgrade rebuilds the vectors
without a single LLM call."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragbench.cache.store import StageCache
from ragbench.errors import CacheLockTimeout
from tests.fixtures.jobs import run_job
from tests.fixtures.llm_server import LLMServer

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
HOLDER = """
import sys, time
from pathlib import Path
from ragbench.cache.lock import hold
lock = Path(sys.argv[1])
lock.parent.mkdir(parents=True, exist_ok=True)
with hold(lock, timeout_s=5, what="the test's holder process"):
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.fixture()
def holder() -> Iterator:
    """Starts a process that holds a lock file until the test ends; yields a function(lock path) -> Popen."""
    procs: list[subprocess.Popen] = []

    def start(lock: Path) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], env=ENV, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def test_a_lock_held_by_another_process_ends_in_a_named_error_within_its_timeout(tmp_path, holder):
    key = "ef" * 32
    proc = holder(tmp_path / "c" / "index" / f"{key}.lock")
    cache = StageCache(dir=str(tmp_path / "c"), lock_timeout_s=1.5)
    start = time.monotonic()
    with pytest.raises(CacheLockTimeout, match=rf"still held after 1.5 s by pid {proc.pid} on host .*"
                                                r"the test's holder process"):
        cache.folder("index", key, {}, build=lambda: "x", save=lambda v, f: None, load=lambda f, m: "x")
    assert 1.5 <= time.monotonic() - start < 30  # waited its timeout, then gave up (a loose bound)


def _plain_job(tmp_path: Path, cache_dir: Path) -> list[str]:
    return ["dataset=qasper", "dataset.sample_size=2", "retrieval=bm25", f"cache.dir={cache_dir}"]


def test_a_job_waiting_on_a_held_lock_fails_with_the_holder_named(tmp_path, holder):
    first, _ = run_job(_plain_job(tmp_path, tmp_path / "warm"), tmp_path)  # learns the job's first lock
    key = first.data.tags["ragbench.cache_key.retrieval"]
    cache_dir = tmp_path / "cold"
    proc = holder(cache_dir / "retrieval" / f"{key}.lock")
    store = tmp_path / "sub"
    cmd = [sys.executable, "-m", "ragbench", *_plain_job(tmp_path, cache_dir), "cache.lock_timeout_s=2",
           f"tracking.uri=sqlite:///{store}/mlflow.db", f"tracking.artifact_root={store}/artifacts",
           f"hydra.run.dir={tmp_path}/outputs"]
    start = time.monotonic()
    job = subprocess.run(cmd, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    elapsed = time.monotonic() - start
    assert job.returncode == 1, job.stderr[-3000:]
    assert f"waiting up to 2 s (cache.lock_timeout_s) for the cache lock {cache_dir}" in job.stderr
    assert f"still held after 2 s by pid {proc.pid}" in job.stderr and "Traceback" not in job.stderr
    assert elapsed < 240  # the job ends instead of hanging on the lock (loose: includes start-up)
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{store}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("ragbench").experiment_id])
    assert run.info.status == "FAILED" and run.data.tags["ragbench.error"].startswith("[RB-CACHE-002] CacheLockTimeout")


# ------------------------------------------------------------------ read_only and the LLM response cache
@pytest.fixture(scope="module")
def server() -> Iterator[LLMServer]:
    with LLMServer() as srv:
        yield srv


def _llm_job(server: LLMServer, cache_dir: Path, *extra: str) -> list[str]:
    return ["dataset=qasper", "dataset.sample_size=3", "retrieval=bm25", f"cache.dir={cache_dir}",
            "llm=openai_compatible", "llm.model=openai/gen-model", f"llm.api_base={server.url}",
            "llm.api_key_env=RAGBENCH_CACHE_IT_KEY", "llm.num_retries=0", "resume=false", *extra]


def _snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every path under ``root`` with size, mtime and content hash (folders too: a mkdir shows)."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.stat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        out[p.relative_to(root).as_posix()] = (st.st_size if p.is_file() else 0, st.st_mtime_ns, digest)
    return out


def _chmod(root: Path, writable: bool) -> None:
    for p in [root, *root.rglob("*")]:
        mode = p.stat().st_mode
        p.chmod(mode | 0o200 if writable else mode & ~0o222)


def test_read_only_writes_nothing_and_a_paid_call_never_fails_its_case(tmp_path, server, monkeypatch):
    monkeypatch.setenv("RAGBENCH_CACHE_IT_KEY", "none")
    cache_dir = tmp_path / "cache"
    server.reset()
    first, _ = run_job(_llm_job(server, cache_dir), tmp_path)
    assert first.info.status == "FINISHED" and server.count == 1 + 3  # the preflight, then one call per case
    assert list((cache_dir / "llm").rglob("*.json"))  # read_write filled the LLM response cache
    before = _snapshot(cache_dir)
    _chmod(cache_dir, writable=False)  # as root this stops nothing: the snapshot is the real check
    try:
        server.reset()
        other, _ = run_job(_llm_job(server, cache_dir, "cache.mode=read_only", "llm.model=openai/other-model"),
                           tmp_path)
        assert other.info.status == "FINISHED" and server.count == 1 + 3  # preflight and calls made: nothing cached for this model
        assert other.data.metrics["cases/failed"] == 0  # ... and no case failed after its paid call
        server.reset()
        again, _ = run_job(_llm_job(server, cache_dir, "cache.mode=read_only"), tmp_path)
        assert again.info.status == "FINISHED" and server.count == 0  # read_only still serves
        assert again.data.metrics["cache/answers/hits"] == 3
        assert again.data.metrics["answer/f1"] == first.data.metrics["answer/f1"]
        assert _snapshot(cache_dir) == before  # no entry, reply, lock or folder written
    finally:
        _chmod(cache_dir, writable=True)


def test_a_library_upgrade_rebuilds_vectors_and_pays_no_llm_call(tmp_path, server, monkeypatch):
    """Issue 13: after `pip install -U numpy` cached vectors are rebuilt, not refused with IndexMismatchError."""
    monkeypatch.setenv("RAGBENCH_CACHE_IT_KEY", "none")
    cache_dir = tmp_path / "cache"
    dense = ["retrieval=dense"]
    server.reset()
    first, _ = run_job([*_llm_job(server, cache_dir), *dense], tmp_path)
    assert first.info.status == "FINISHED" and server.count == 1 + 3  # the preflight, then one call per case
    import ragbench.cache.documents as documents
    import ragbench.cache.keys as keys
    import ragbench.pipeline as pipeline

    real = pipeline.library_versions
    for module in (pipeline, keys, documents):  # every module that puts library versions into a cache key
        monkeypatch.setattr(module, "library_versions", lambda: {**real(), "numpy": "99.0.0"})
    server.reset()
    upgraded, _ = run_job([*_llm_job(server, cache_dir), *dense], tmp_path)
    m = upgraded.data.metrics
    assert upgraded.info.status == "FINISHED"
    assert m["cache/index/misses"] == 1 and m["cache/retrieval/misses"] == 1 and m["ingest/embedded_texts"] > 0
    assert server.count == 0 and m["cache/answers/hits"] == 3  # the same contexts: every answer from the cache
    same = {k: v for k, v in first.data.metrics.items() if k.startswith(("retrieval/", "answer/", "context/"))}
    assert same and same == {k: m[k] for k in same}
    assert upgraded.data.tags["ragbench.cache_key.index"] != first.data.tags["ragbench.cache_key.index"]
