"""Corrupt entries through a whole pipeline run (toy components): read_write gives the clean run's exact
metrics, read_only stops the job with CacheCorruptError (never a failed case scored from it)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragbench.cache.store import StageCache
from ragbench.components import Components
from ragbench.errors import CacheCorruptError
from ragbench.pipeline import Pipeline
from tests.fixtures.toy import toy_components


def _components() -> Components:
    return toy_components()


def _scores(metrics) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if not k.startswith(("cache/", "latency/", "ingest/", "llm/cache"))}


def _swap_vectors(root) -> None:
    (npy,) = (root / "index").glob("*/vectors.npy")
    vecs = np.load(npy)
    np.save(npy, vecs[::-1].copy())  # same shape, other rows: silently wrong without a content hash


def _garble_answer(root) -> None:
    record = next((root / "answers").rglob("*.json"))
    data = json.loads(record.read_text())
    data["value"]["citations"] = "1"  # valid JSON, wrong shape
    record.write_text(json.dumps(data))


@pytest.mark.parametrize("corrupt", [_swap_vectors, _garble_answer], ids=["vectors swapped", "answer garbled"])
def test_corrupt_entry_in_a_run(tmp_path, corrupt):
    clean = Pipeline(_components(), cache=StageCache(dir=str(tmp_path))).run()
    (tmp_path / "retrieval").rename(tmp_path / "retrieval-aside")  # retrieval must read the vectors again
    corrupt(tmp_path)
    with pytest.raises(CacheCorruptError, match=r"is corrupt: .*\n  fix: rerun with cache.mode=read_write"):
        Pipeline(_components(), cache=StageCache(dir=str(tmp_path), mode="read_only")).run()
    rebuilt = Pipeline(_components(), cache=StageCache(dir=str(tmp_path))).run()
    assert _scores(rebuilt.metrics) == _scores(clean.metrics)  # the rebuilt run is exactly the clean one
    assert sum(v for k, v in rebuilt.metrics.items() if k.endswith("/corrupt")) == 1
    assert rebuilt.metrics["cases/failed"] == 0
