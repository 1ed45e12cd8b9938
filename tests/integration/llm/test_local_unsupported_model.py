"""``llm=local`` with a GGUF file of an architecture transformers cannot read: the job fails in one line
naming the architecture and the fix (exit 1, no traceback, no MLflow run left RUNNING), before any case is
asked. The file is a real GGUF, written here with the gguf package (its header names architecture
``mamba9``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.local_model import require

REPO = Path(__file__).resolve().parents[3]
require(("torch", "transformers", "gguf", "accelerate"), "pip install -e '.[local]'")


def _gguf(path: Path, architecture: str) -> Path:
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_context_length(512)
    writer.add_tensor("t0", np.arange(64, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_an_architecture_transformers_cannot_read_fails_the_job_in_one_line(tmp_path):
    model = _gguf(tmp_path / "odd.gguf", "mamba9")
    args = [sys.executable, "-m", "ragbench", "dataset=qasper", "dataset.max_queries=1", "retrieval=bm25",
            "llm=local", f"llm.model={model}", f"cache.dir={tmp_path / 'cache'}",
            f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", f"hydra.run.dir={tmp_path / 'run'}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "architecture 'mamba9'" in line]
    assert lines, proc.stderr[-3000:]
    fix = "is not supported by transformers' GGUF reader; fix: use a model of a supported architecture"
    assert fix in lines[0]
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    assert all(r.info.status != "RUNNING" for r in runs)
    assert all(r.data.metrics.get("llm/generation_calls", 0) == 0 for r in runs)
