"""The encoder worker (``ragbench.embed.worker``) with the real MiniLM: its vectors are the process's to
the bit, the process never imports torch, and a real run gives the same cached vectors (bytes), cache
keys and metrics with the worker as without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragbench.tracking import background

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not background.can_fork(), reason="fork: Linux only")]
REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys
import numpy as np
from ragbench.app import build
from ragbench.embed import worker
from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder
from tests.fixtures.jobs import compose_cfg
from pathlib import Path

c, _ = build(compose_cfg(["dataset=locomo"], Path(sys.argv[1])))
evalset = c.dataset.load()
texts = [ch.text for ch in c.chunker.chunk(evalset.documents).searchable()][:400]
queries = [q.text for q in evalset.queries][:50]
torch_at_fork = "torch" in sys.modules
assert worker.start() is not None
remote = SentenceTransformerEmbedder(show_progress=False, worker=True)
docs_w, queries_w = remote.embed_documents(texts), remote.embed_queries(queries)
torch_after = "torch" in sys.modules
pid = worker.current().pid
worker.stop()
local = SentenceTransformerEmbedder(show_progress=False, worker=False)
docs_p, queries_p = local.embed_documents(texts), local.embed_queries(queries)
print(json.dumps({"torch_at_fork": torch_at_fork, "torch_after": torch_after, "worker": pid,
                  "docs": [len(texts), bool(np.array_equal(docs_w, docs_p)), docs_w.dtype.name],
                  "queries": [len(queries), bool(np.array_equal(queries_w, queries_p))]}))
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "RAGBENCH_CACHE": str(tmp_path / "cache"),
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def test_the_workers_vectors_are_the_processes_to_the_bit(tmp_path):
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          cwd=REPO, env=_env(tmp_path), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["torch_at_fork"] is False and got["torch_after"] is False  # the encoder ran in the worker only
    assert got["docs"] == [400, True, "float32"] and got["queries"] == [50, True]


def _run(tmp_path: Path, worker: bool) -> tuple[subprocess.CompletedProcess, dict[str, float], dict[str, str]]:
    import mlflow

    folder = tmp_path / ("on" if worker else "off")
    folder.mkdir()
    done = subprocess.run([sys.executable, "-m", "ragbench", "dataset=locomo", "retrieval=dense", "stages=retrieval",
                           f"embedder.worker={str(worker).lower()}", "hydra.verbose=ragbench.embed.worker"],
                          capture_output=True, text=True, cwd=folder, env=_env(folder), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{folder}/mlruns/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("ragbench").experiment_id])
    return done, run.data.metrics, run.data.tags


def test_a_run_with_the_worker_equals_one_without(tmp_path):
    on, metrics_on, tags_on = _run(tmp_path, worker=True)
    off, metrics_off, tags_off = _run(tmp_path, worker=False)
    assert "encoder worker" in on.stderr and " started" in on.stderr
    assert "no encoder worker: embedder.worker=false" in off.stderr
    assert tags_on["ragbench.index_sha256"] == tags_off["ragbench.index_sha256"]  # the worker is not identity
    for stage in ("index", "query_vectors"):  # the cached vectors, byte for byte
        (v_on,), (v_off,) = ((tmp_path / side / "cache" / stage).glob("*/vectors.npy") for side in ("on", "off"))
        assert v_on.relative_to(tmp_path / "on") == v_off.relative_to(tmp_path / "off")
        assert v_on.read_bytes() == v_off.read_bytes()
    quality = {k: v for k, v in metrics_on.items() if k.startswith(("retrieval/", "context/"))}
    assert quality and quality == {k: metrics_off[k] for k in quality}
