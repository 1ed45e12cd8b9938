"""Issue 38.2: one record, complete. A real job's MLflow tags are its record's (``run.json``: ``tags``, and
``versions`` as the ``ragbench.env.*`` tags), and a failed job's zero scores are in its record as in MLflow.
Before, the tags known at the run's start (role, overrides, job hash, models, stages, environment, routing,
cost basis) and ``ragbench.error`` were MLflow's only, and so were a failed job's zero scores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragbench.errors import RagbenchError
from ragbench.record import ERROR_TAG, RunRecord
from ragbench.tracking.mlflow_sink import FOLDER_TAG, mlflow_tags
from ragbench.tracking.owner import OWNER_TAG
from ragbench.tracking.traces import TRACES_TAG
from tests.fixtures.jobs import run_job

pytestmark = pytest.mark.slow
JOB = ["dataset=qasper", "dataset.sample_size=2", "judge=lexical", "retrieval=bm25"]
# The tags only MLflow holds (docs/layout.md, "A job's life"): its own bookkeeping, not the job's facts.
MLFLOW_ONLY = {"mlflow.source.type", "mlflow.source.name", "mlflow.source.git.commit", "mlflow.user",
               "mlflow.runName", "mlflow.parentRunId", "mlflow.loggedArtifacts", OWNER_TAG, FOLDER_TAG, TRACES_TAG}


def _record(client: Any, run: Any, tmp_path: Path) -> RunRecord:
    path = client.download_artifacts(run.info.run_id, "run.json", str(tmp_path))
    return RunRecord.from_json(Path(path).read_text())


def _recorded(run: Any) -> dict[str, str]:
    """The run's tags less those only MLflow holds."""
    return {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.") and k not in (OWNER_TAG, FOLDER_TAG, TRACES_TAG)}


def test_a_finished_jobs_mlflow_tags_are_its_records(tmp_path):
    run, client = run_job([*JOB, f"cache.dir={tmp_path / 'cache'}"], tmp_path)
    assert run.info.status == "FINISHED"
    record = _record(client, run, tmp_path)
    assert _recorded(run) == mlflow_tags(record)
    assert set(run.data.tags) - set(mlflow_tags(record)) <= MLFLOW_ONLY
    for key in ("ragbench.role", "ragbench.overrides", "ragbench.job_hash", "ragbench.generator",
                "ragbench.stages", "ragbench.embedder", "ragbench.cost_basis", "ragbench.dataset_sha256"):
        assert record.tags[key] == run.data.tags[key], key
    assert not any(k.startswith("ragbench.env.") for k in record.tags)  # one list: the record's versions
    curves = set(record.curves)
    assert {k: v for k, v in run.data.metrics.items() if k not in curves} == dict(record.metrics)


def test_a_failed_jobs_error_and_zero_scores_are_in_its_record(tmp_path):
    """A job whose reranker cannot load fails before any case: 0 for its answer scores, in both places."""
    with pytest.raises(RagbenchError):
        run_job([*JOB, f"cache.dir={tmp_path / 'cache'}", "reranker=cross_encoder",
                 "reranker.rerankers.cross_encoder.model=/nonexistent/cross-encoder"], tmp_path)
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("ragbench").experiment_id])
    assert run.info.status == "FAILED"
    record = _record(client, run, tmp_path)
    assert record.status == "FAILED" and record.tags[ERROR_TAG] == run.data.tags[ERROR_TAG]
    assert "could not load cross-encoder" in record.tags[ERROR_TAG]
    assert record.metrics["answer/f1"] == 0.0 and dict(record.metrics) == run.data.metrics
    assert _recorded(run) == mlflow_tags(record)
