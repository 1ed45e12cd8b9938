"""Distributed encoding: ``stages=encode embedder.shard=i/n`` jobs fill the shared cache, one search job
assembles their vectors (encoding nothing) and scores exactly as a job that encoded the corpus itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.fixtures.jobs import run_job
from tests.test_sweeps import ragbench, runs

pytestmark = pytest.mark.slow
SAMPLE = ["dataset=qasper", "dataset.num_docs=1"]  # one paper: a few hundred sentences
QASPER = [*SAMPLE, "stages=retrieval"]


def _retrieval(run) -> dict[str, float]:
    return {k: v for k, v in run.data.metrics.items() if k.startswith("retrieval/")}


def _vectors(cache: Path) -> np.ndarray:
    (entry,) = [p for p in (cache / "index").iterdir() if p.is_dir() and not p.name.startswith(".")]
    return np.load(entry / "vectors.npy")


def test_a_shard_sweep_then_one_search_scores_as_a_full_encode(tmp_path):
    shared = tmp_path / "shared"
    proc = ragbench(["-m", "stages=encode", "embedder.shard=0/2,1/2", *SAMPLE, f"cache.dir={shared}"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "comparison report not logged" not in proc.stderr  # an encode-only sweep has nothing to compare
    client, every = runs(tmp_path)
    jobs = sorted((r for r in every if r.data.tags.get("ragbench.role") == "job"), key=lambda r: r.info.run_name)
    assert [r.data.tags["ragbench.stages"] for r in jobs] == ["encode", "encode"]
    assert all(r.info.status == "FINISHED" for r in jobs)
    # the paper's texts are one encode call: shard 0/2 holds no rows, 1/2 all of them (as a full encode would)
    rows = sorted(r.data.metrics["counts/shard_rows"] for r in jobs)
    assert rows == [0.0, jobs[0].data.metrics["counts/searchable_chunks"]]
    assert not any(k.startswith("retrieval/") for r in jobs for k in r.data.metrics)

    search, _ = run_job([*QASPER, f"cache.dir={shared}"], tmp_path)
    assert search.info.status == "FINISHED"
    assert search.data.metrics["cache/index_shard/hits"] == 2 and search.data.metrics["cache/index/misses"] == 1
    assert search.data.metrics["ingest/embedded_texts"] == 0  # assembled: no forward pass over the corpus
    alone, _ = run_job([*QASPER, f"cache.dir={tmp_path / 'alone'}"], tmp_path)
    assert alone.data.metrics["ingest/embedded_texts"] > 0
    assert _retrieval(search) == _retrieval(alone) and _retrieval(search)
    assert np.array_equal(_vectors(shared), _vectors(tmp_path / "alone"))

    from ragbench.compare.select import find_runs  # compare leaves the encode-only runs out, with a note

    found, notes = find_runs(client, f"sqlite:///{tmp_path}/mlruns/mlflow.db", "ragbench",
                             run_ids=[jobs[1].info.run_id, search.info.run_id])
    assert [r.info.run_id for r in found] == [search.info.run_id]
    assert any(n.startswith("skipped (stages=encode, vectors only)") for n in notes)


def test_shards_of_several_encode_blocks_are_the_full_encodes_bytes(tmp_path, monkeypatch):
    # encode blocks of 100 texts (a million-passage corpus has them of 65,536): [0,100) [100,200) [200,...)
    monkeypatch.setattr("ragbench.pipeline.SPILL_ROWS", 100)
    shared = tmp_path / "shared"
    shards = [run_job([*SAMPLE, "stages=encode", f"embedder.shard={i}/2", f"cache.dir={shared}"], tmp_path)[0]
              for i in range(2)]
    total = shards[0].data.metrics["counts/searchable_chunks"]
    assert 200 < total and [s.data.metrics["counts/shard_rows"] for s in shards] == [100, total - 100]
    search, _ = run_job([*QASPER, f"cache.dir={shared}"], tmp_path)
    alone, _ = run_job([*QASPER, f"cache.dir={tmp_path / 'alone'}"], tmp_path)
    assert search.data.metrics["ingest/embedded_texts"] == 0 and alone.data.metrics["ingest/embedded_texts"] > 0
    assert np.array_equal(_vectors(shared), _vectors(tmp_path / "alone"))
    assert _retrieval(search) == _retrieval(alone)


def test_a_shard_sweep_rerun_with_another_cache_encodes_its_shards_there(tmp_path):
    """Issue 45.8b: rerun with a new cache.dir, every encode job was skipped as "already finished", no shard
    was written, and the search job then encoded the whole corpus with no word. Resume follows the cache."""
    first, second = tmp_path / "first", tmp_path / "second"
    sweep = ["-m", "stages=encode", "embedder.shard=0/2,1/2", *SAMPLE]
    assert ragbench([*sweep, f"cache.dir={first}"], tmp_path).returncode == 0
    rerun = ragbench([*sweep, f"cache.dir={second}"], tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    said = rerun.stdout + rerun.stderr
    assert said.count("its index shard is not in the cache at") == 2
    assert "shown in this sweep as run" not in said
    assert len(list((second / "index_shard").glob("*/manifest.json"))) == 2  # both shards, in the new cache
    search, _ = run_job([*QASPER, f"cache.dir={second}"], tmp_path)
    assert search.data.metrics["cache/index_shard/hits"] == 2
    assert search.data.metrics["ingest/embedded_texts"] == 0  # assembled from them: nothing encoded
    again = ragbench([*sweep, f"cache.dir={second}"], tmp_path)  # in this cache now: finished, copied
    assert again.returncode == 0 and (again.stdout + again.stderr).count("shown in this sweep as run") == 2
