"""The stage cache across jobs, its integrity checks and modes, and resuming a killed sweep."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest

from ragbench.cache.store import StageCache
from ragbench.errors import ConfigError, RagbenchError
from tests.fixtures.jobs import run_job

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
QASPER = Path(str(resources.files("ragbench.datasets").joinpath("samples", "qasper")))


def test_cache_hit_across_jobs_and_topk_never_in_the_index_key(tmp_path):
    cache = [f"cache.dir={tmp_path / 'cache'}", "dataset=qasper"]
    a, _ = run_job([*cache, "retrieval.topk=3"], tmp_path)
    # top-k 10 is served by top-k 3's search (one search depth, retrieval.search_depth=10): no index read
    shared, _ = run_job([*cache, "retrieval.topk=10"], tmp_path)
    assert shared.data.metrics["cache/retrieval/hits"] == 1 and "cache/index/hits" not in shared.data.metrics
    # top-k 20 needs a deeper search: the cached index and query vectors serve it, nothing is re-encoded
    b, _ = run_job([*cache, "retrieval.topk=20"], tmp_path)
    assert a.data.metrics["cache/index/misses"] == 1 and a.data.metrics["ingest/embedded_texts"] > 0
    assert b.data.metrics["cache/index/hits"] == 1 and b.data.metrics["ingest/embedded_texts"] == 0
    assert b.data.metrics["cache/query_vectors/hits"] == 1
    assert a.data.tags["ragbench.cache_key.index"] == b.data.tags["ragbench.cache_key.index"]
    c, _ = run_job([*cache, "retrieval.topk=3", "resume=false"], tmp_path)  # the very same job, again
    assert c.data.metrics["cache/retrieval/hits"] == 1
    assert c.data.metrics["cache/answers/hits"] == c.data.metrics["counts/queries"]
    assert c.data.metrics["answer/f1"] == a.data.metrics["answer/f1"]


def test_one_character_corpus_change_misses(tmp_path):
    data = tmp_path / "qasper"
    shutil.copytree(QASPER, data)
    cache = [f"cache.dir={tmp_path / 'cache'}", "dataset=qasper", f"dataset.path={data}", "dataset.sample_size=2"]
    a, _ = run_job(cache, tmp_path)
    f = data / "qasper-train-v0.3.json"
    text = f.read_text()
    i = text.index("Affective events BIBREF0")
    f.write_text(text[:i] + "a" + text[i + 1:])  # one character
    b, _ = run_job([*cache, "resume=false"], tmp_path)
    assert a.data.tags["ragbench.dataset_sha256"] != b.data.tags["ragbench.dataset_sha256"]
    assert b.data.metrics["cache/index/misses"] == 1 and b.data.metrics["ingest/embedded_texts"] > 0
    # sampling other questions of the same corpus re-embeds nothing
    c, _ = run_job([*cache, "resume=false", "dataset.sample_size=4"], tmp_path)
    assert c.data.metrics["cache/index/hits"] == 1 and c.data.metrics["ingest/embedded_texts"] == 0


def _build_once(args):
    cache_dir, counter = args
    cache = StageCache(dir=cache_dir)

    def build():
        with open(counter, "a") as fh:
            fh.write("built\n")
        time.sleep(1.0)
        return "value"

    def save(value, folder):
        (folder / "v.txt").write_text(value)

    value, hit = cache.folder("index", "k" * 64, {"what": "test"}, build=build, save=save,
                              load=lambda folder, manifest: (folder / "v.txt").read_text())
    return value, hit


def test_concurrent_double_build_produces_one_entry(tmp_path):
    counter = tmp_path / "builds.txt"
    with multiprocessing.get_context("fork").Pool(2) as pool:
        results = pool.map(_build_once, [(str(tmp_path / "c"), str(counter))] * 2)
    assert sorted(hit for _, hit in results) == [False, True]  # one built it, the other waited and read it
    assert counter.read_text().count("built") == 1
    entries = [p for p in (tmp_path / "c" / "index").iterdir() if p.is_dir()]
    assert [p.name for p in entries] == ["k" * 64]  # no temp folders left behind
    assert json.loads((entries[0] / "manifest.json").read_text())["what"] == "test"


def test_cache_modes(tmp_path):
    def use(mode):
        cache = StageCache(dir=str(tmp_path / "c"), mode=mode)
        calls = []
        value, hit = cache.folder("s", "a" * 64, {}, build=lambda: calls.append(1) or "x",
                                  save=lambda v, f: (f / "v").write_text(v), load=lambda f, m: (f / "v").read_text())
        return hit, len(calls)

    assert use("read_only") == (False, 1) and not (tmp_path / "c").exists()  # never writes
    assert use("read_write") == (False, 1)
    assert use("read_write") == (True, 0)
    assert use("off") == (False, 1)  # never reads
    assert use("refresh") == (False, 1)  # rebuilds and overwrites
    assert use("read_only") == (True, 0)
    with pytest.raises(ConfigError, match="read_write, refresh, read_only, off"):
        StageCache(dir=str(tmp_path), mode="sometimes")


def test_index_built_with_other_settings_is_refused(tmp_path):
    cache_dir = tmp_path / "cache"
    overrides = [f"cache.dir={cache_dir}", "dataset=qasper", "dataset.sample_size=2"]
    run_job(overrides, tmp_path)
    (manifest,) = (cache_dir / "index").glob("*/manifest.json")
    data = json.loads(manifest.read_text())
    data["libraries"]["sentence-transformers"] = "0.0.1"
    manifest.write_text(json.dumps(data))
    with pytest.raises(RagbenchError):  # a top-k past the shared search depth: retrieval runs, the index is read
        run_job([*overrides, "resume=false", "retrieval.topk=20"], tmp_path)
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    failed = client.search_runs([client.get_experiment_by_name("ragbench").experiment_id],
                                filter_string="attributes.status = 'FAILED'")
    error = failed[0].data.tags["ragbench.error"]
    assert error.startswith("[RB-INDEX-001] IndexMismatchError") and "sentence-transformers" in error
    assert "0.0.1" in error and "cache.mode=refresh" in error
    run, _ = run_job([*overrides, "resume=false", "retrieval.topk=20", "cache.mode=refresh"], tmp_path)  # the advertised fix works
    assert run.info.status == "FINISHED"


def _runs(db: Path) -> list[tuple]:
    """(run id, status, job hash, parent id, role) of every run; [] while MLflow creates the schema."""
    if not db.exists():
        return []
    with sqlite3.connect(db) as con:
        try:
            return _select(con)
        except sqlite3.OperationalError:  # the store is still being created by the sweep
            return []


def _select(con: sqlite3.Connection) -> list[tuple]:
    return con.execute(
        "select r.run_uuid, r.status, "
        "(select value from tags t where t.run_uuid = r.run_uuid and t.key = 'ragbench.job_hash'), "
        "(select value from tags t where t.run_uuid = r.run_uuid and t.key = 'mlflow.parentRunId'), "
        "(select value from tags t where t.run_uuid = r.run_uuid and t.key = 'ragbench.role'), "
        "(select value from tags t where t.run_uuid = r.run_uuid and t.key = 'ragbench.reused_from') "
        "from runs r").fetchall()


def test_resume_after_kill_9(tmp_path):
    cache_dir = tmp_path / "cache"
    args = [sys.executable, "-m", "ragbench", "-m", "retrieval.topk=1,2,3", "dataset=qasper",
            "llm._target_=tests.fixtures.components.SlowAnswerer", "+llm.delay=0.25", f"cache.dir={cache_dir}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    db = tmp_path / "mlruns" / "mlflow.db"
    proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 300
    answers = cache_dir / "answers"
    while time.time() < deadline:  # kill once job 0 has finished and job 1 is half-way through its cases
        done = sum(1 for r in _runs(db) if r[1] == "FINISHED" and r[4] == "job")
        cached = sum(1 for _ in answers.rglob("*.json")) if answers.exists() else 0
        if done and cached >= 18 + 5:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _runs(db)
    assert sorted(r[1] for r in before if r[4] == "job") == ["FINISHED", "RUNNING"]
    finished_hash = next(r[2] for r in before if r[1] == "FINISHED" and r[4] == "job")

    again = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    after = _runs(db)
    assert not [r for r in after if r[1] == "RUNNING"]  # never left RUNNING: the killed sweep's parent neither
    new_parent = next(r[0] for r in sorted(after) if r[4] == "sweep" and r[1] == "FINISHED")
    jobs = [r for r in after if r[3] == new_parent]
    assert len({r[2] for r in jobs}) == len(jobs) == 3 and all(r[1] == "FINISHED" for r in jobs)  # all three, once
    [copy] = [r for r in jobs if r[2] == finished_hash]  # the finished job did not run twice: it is shown
    original = next(r for r in before if r[2] == finished_hash)  # in the new sweep as a copy of the old run,
    assert copy[5] == original[0] and copy[0] != original[0]  # which stays in the killed sweep, untouched
    assert next(r for r in after if r[0] == original[0])[3] == original[3]
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    reruns = [client.get_run(r[0]) for r in jobs if r[5] is None]
    assert len(reruns) == 2
    assert all(run.data.metrics["ingest/embedded_texts"] == 0 for run in reruns)  # nothing re-embedded
    assert max(run.data.metrics.get("cache/answers/hits", 0) for run in reruns) >= 5  # finished cases reused
    killed = [r for r in after if r[1] == "KILLED"]
    assert sorted(r[4] for r in killed) == ["job", "sweep"]  # the interrupted job and its sweep, closed
