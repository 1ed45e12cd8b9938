"""``embedder.backend=auto`` with the real MiniLM (issue 46 item 1): it runs ONNX Runtime (a base dependency
now) after checking once that its vectors equal torch's; torch and auto jobs share index keys and score the
same; the run's ``ragbench.embedder_backend`` tag says which backend encoded and why."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragbench.embed import auto
from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder
from tests.fixtures.jobs import run_job

pytestmark = pytest.mark.slow

TEXTS = ["What did Caroline research?", "a", "Melanie ran a charity race for mental health last Saturday, "
         "then painted a sunrise over the lake with her kids.", "LGBTQ support group, 7 May 2023"]
JOB = ["dataset=qasper", "dataset.sample_size=2", "judge=lexical", "retrieval=dense", "stages=retrieval",
       "embedder.show_progress=false"]


def test_auto_runs_onnx_with_torchs_vectors_and_checks_once(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGBENCH_CACHE", str(tmp_path))
    torch_vecs = SentenceTransformerEmbedder(backend="torch", show_progress=False).embed_documents(TEXTS)
    first = SentenceTransformerEmbedder(show_progress=False)
    vecs = first.embed_documents(TEXTS)
    assert first.choice is not None and first.choice.backend == "onnx"
    assert np.abs(vecs - torch_vecs).max() < 1e-5 and first.identity == SentenceTransformerEmbedder(
        backend="torch").identity
    [verdict] = (tmp_path / auto.STAGE).iterdir()
    assert json.loads(verdict.read_text())["min_cosine"] >= auto.MIN_COSINE

    def never(*_a: object) -> float:
        raise AssertionError("the stored verdict must answer")

    monkeypatch.setattr(auto, "min_cosine", never)
    again = SentenceTransformerEmbedder(show_progress=False)
    assert np.array_equal(again.embed_documents(TEXTS), vecs) and again.choice == first.choice


def _retrieval(run) -> dict[str, float]:
    return {k: v for k, v in run.data.metrics.items() if k.startswith("retrieval/")}


def test_torch_and_auto_jobs_share_the_index_and_score_alike(tmp_path):
    shared = f"cache.dir={tmp_path / 'shared'}"
    torch_run, _ = run_job([*JOB, shared, "embedder.backend=torch"], tmp_path / "torch")
    from_cache, _ = run_job([*JOB, shared], tmp_path / "auto-warm")
    cold, _ = run_job([*JOB, f"cache.dir={tmp_path / 'own'}"], tmp_path / "auto-cold")
    assert torch_run.data.tags[auto.TAG] == "torch: set by embedder.backend"
    assert from_cache.data.tags[auto.TAG] == "auto: not loaded (every vector came from the cache)"
    assert cold.data.tags[auto.TAG].startswith("onnx: onnxruntime ")
    assert "min cosine to torch " in cold.data.tags[auto.TAG]
    for run in (from_cache, cold):
        assert run.data.tags["ragbench.embedder"] == torch_run.data.tags["ragbench.embedder"]
        assert _retrieval(run) == _retrieval(torch_run) and _retrieval(run)


def test_prepare_exports_and_checks_once_offline(tmp_path):
    """The README's install line ends with this step: offline, its progress on stderr, each line within
    80 columns; a second run finds the export and the verdict in the cache."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "RAGBENCH_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    cmd = [sys.executable, "-m", "ragbench.embed", "prepare"]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr
    lines = [ln for ln in first.stderr.splitlines() if ln.startswith("prepare: ")]
    assert lines[-1].endswith("embedder.backend=auto runs onnx") and all(len(ln) <= 80 for ln in lines)
    [verdict] = (tmp_path / auto.STAGE).iterdir()
    stamp = verdict.stat().st_mtime_ns
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0 and "against torch's" not in again.stderr  # nothing measured again
    assert verdict.stat().st_mtime_ns == stamp
