"""``MlflowTracker.batched``: a job's tags, metrics and curves in one store write, with the values of one
write per call (real sqlite store), also when the job fails part way."""

from __future__ import annotations

import contextlib

import pytest

from ragbench.tracking.mlflow_tracker import MlflowTracker

TAGS = {f"ragbench.t{i}": f"v{i}" for i in range(150)}  # over MLflow's 100 tags a call: it splits them
METRICS = {f"m/{i}": i / 3 for i in range(1200)}  # over its 1,000 entities a call
CURVES = {"retrieval/recall_at_k_curve": {1: 0.25, 3: 0.5, 5: 0.75}}


def _log(tracker: MlflowTracker, run_id: str) -> None:
    tracker.set_tags(run_id, TAGS)
    tracker.log_metrics(run_id, METRICS)
    tracker.log_curves(run_id, CURVES)


def _logged(tracker: MlflowTracker, run_id: str) -> tuple[dict, dict, list]:
    run = tracker.client.get_run(run_id)
    tags = {k: v for k, v in run.data.tags.items() if k.startswith("ragbench.t")}
    curve = sorted((m.step, m.value) for m in tracker.client.get_metric_history(run_id, "retrieval/recall_at_k_curve"))
    return tags, dict(run.data.metrics), curve


@pytest.mark.parametrize("fails", [False, True], ids=["finished", "failed part way"])
def test_batched_writes_once_with_the_same_values(tmp_path, monkeypatch, fails):
    tracker = MlflowTracker(uri=f"sqlite:///{tmp_path}/mlflow.db", artifact_root=str(tmp_path / "artifacts"))
    plain = tracker.start_run(run_name="plain", tags={})
    _log(tracker, plain)
    batched = tracker.start_run(run_name="batched", tags={})
    calls: list[str] = []
    write = tracker.client.log_batch
    monkeypatch.setattr(tracker.client, "log_batch", lambda run_id, **kw: (calls.append(run_id), write(run_id, **kw))[1])
    with pytest.raises(RuntimeError) if fails else contextlib.nullcontext():
        with tracker.batched(batched):
            _log(tracker, batched)
            assert not calls  # nothing written until the job's logging is done
            if fails:
                raise RuntimeError("the job failed after logging")
    assert calls == [batched]
    assert _logged(tracker, batched) == _logged(tracker, plain)
    tracker.log_metrics(batched, {"after": 1.0})  # outside the block: written at once again
    assert calls == [batched, batched]



def test_a_dataset_logged_by_two_parallel_jobs_at_once_is_logged_again_not_failed():
    """MLflow looks a dataset row up, then inserts it: the slower of two parallel jobs hits the unique key."""
    from mlflow.exceptions import MlflowException

    from ragbench.tracking.mlflow_tracker import MlflowTracker

    class Racing:
        def __init__(self) -> None:
            self.calls = 0

        def log_inputs(self, run_id, datasets):
            self.calls += 1
            if self.calls == 1:
                raise MlflowException("(sqlite3.IntegrityError) UNIQUE constraint failed: datasets.experiment_id, "
                                      "datasets.name, datasets.digest")

    tracker = MlflowTracker(uri="sqlite:///unused.db")
    tracker._client = client = Racing()
    tracker.log_dataset("run", name="toy", digest="d" * 64, source="/tmp/toy", rows=[{"qid": "q1"}], tags={})
    assert client.calls == 2
    # a team server on PostgreSQL answers the same race with its own words (three sweeps at once hit it)
    client.calls = 0
    postgres = ('BAD_REQUEST: (psycopg.errors.UniqueViolation) duplicate key value violates unique constraint '
                '"dataset_pk" DETAIL: Key (experiment_id, name, digest)=(2, qasper-sample, 8a46) already exists.')
    first = [True]

    def racing_server(run_id, datasets):
        client.calls += 1
        if first.pop() if first else False:
            raise MlflowException(postgres)

    client.log_inputs = racing_server
    tracker.log_dataset("run", name="toy", digest="d" * 64, source="/tmp/toy", rows=[{"qid": "q1"}], tags={})
    assert client.calls == 2
    # any other store error still fails the job
    client.log_inputs = lambda run_id, datasets: (_ for _ in ()).throw(MlflowException("disk I/O error"))
    with pytest.raises(MlflowException, match="disk I/O error"):
        tracker.log_dataset("run", name="toy", digest="d" * 64, source="/tmp/toy", rows=[{"qid": "q1"}], tags={})
