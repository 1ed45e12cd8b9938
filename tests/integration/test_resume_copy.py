"""A resumed job's copy in a later sweep looks like the run it stands for, read back through MlflowClient
(real sqlite store): its curves with every step, its dataset input, its artifacts (the record), its start and
end times, and a note linking to the run that ran it. Issue 45.6: copies had no artifacts, lasted 0.2 s, had
no dataset input and each @k curve flattened to one point at step 0 (drawn as bars)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import urlparse

from ragbench.record import REUSED_FROM
from ragbench.tracking.mlflow_sink import CASE_TABLE
from ragbench.tracking.mlflow_tracker import MlflowTracker

CURVE = "retrieval/recall_at_k_curve"
ROWS = [{"qid": "q1", "question": "who?", "question_type": "single", "answerable": True}]


def _origin(tracker: MlflowTracker) -> str:
    """A job's run as a sweep writes it: params, metrics, a curve, the case table, the record, a dataset."""
    run_id = tracker.start_run(run_name="topk=5 #1", tags={"ragbench.role": "job", "ragbench.job_hash": "h"})
    tracker.log_params(run_id, {"retrieval.topk": 5})
    tracker.log_metrics(run_id, {"answer/f1": 0.5, "retrieval/recall_at_5": 0.75})
    tracker.log_curves(run_id, {CURVE: {1: 0.25, 3: 0.5, 5: 0.75}})
    tracker.log_table(run_id, ROWS, CASE_TABLE)
    tracker.log_files(run_id, {"run.json": json.dumps({"format": "ragbench-run/2"}), "cases.jsonl": "{}\n"})
    tracker.log_dataset(run_id, name="qasper-sample", digest="d" * 36, source="/data/qasper", rows=ROWS,
                        tags={"queries": "1"})
    time.sleep(0.05)  # a run that lasted a while
    tracker.end_run(run_id, "FINISHED")
    return run_id


def _looks_alike(client, copy_id: str, origin_id: str, downloads: Path) -> None:
    copy, origin = client.get_run(copy_id), client.get_run(origin_id)
    assert copy.info.status == "FINISHED" and copy.info.run_id != origin_id
    assert (copy.info.start_time, copy.info.end_time) == (origin.info.start_time, origin.info.end_time)
    assert copy.data.params == origin.data.params and copy.data.metrics == origin.data.metrics
    curve = sorted((m.step, m.value) for m in client.get_metric_history(copy_id, CURVE))
    assert curve == [(1, 0.25), (3, 0.5), (5, 0.75)]  # a line over k, not one point at step 0
    [inp] = copy.inputs.dataset_inputs
    assert (inp.dataset.name, inp.dataset.digest) == ("qasper-sample", "d" * 36)
    assert {t.key: t.value for t in inp.tags}["queries"] == "1"
    names = sorted(a.path for a in client.list_artifacts(copy_id))
    assert names == sorted(a.path for a in client.list_artifacts(origin_id)) == sorted(
        ["run.json", "cases.jsonl", CASE_TABLE])
    (downloads / copy_id).mkdir(parents=True)
    record = client.download_artifacts(copy_id, "run.json", str(downloads / copy_id))
    assert json.loads(Path(record).read_text()) == {"format": "ragbench-run/2"}
    here, there = (Path(urlparse(r.info.artifact_uri).path) / "cases.jsonl" for r in (copy, origin))
    assert here.stat().st_ino == there.stat().st_ino  # a local store: hard links, no second copy on disk
    tables = "mlflow.loggedArtifacts"  # the UI's "View as table"
    assert copy.data.tags[tables] == origin.data.tags[tables]
    assert origin_id in copy.data.tags["mlflow.note.content"] and copy.data.tags[REUSED_FROM] == origin_id


def test_a_copy_carries_its_origins_curves_dataset_artifacts_and_times(tmp_path):
    tracker = MlflowTracker(uri=f"sqlite:///{tmp_path}/mlflow.db", artifact_root=str(tmp_path / "artifacts"))
    origin_id = _origin(tracker)
    sweep = tracker.start_run(run_name="sweep", tags={"ragbench.role": "sweep"})
    [found] = tracker.finished_runs_of("h")
    copy_id = tracker.copy_run(found, run_name="topk=5 #0", parent_run_id=sweep,
                               tags={REUSED_FROM: origin_id})
    _looks_alike(tracker.client, copy_id, origin_id, tmp_path / "downloads")
    assert tracker.client.get_run(copy_id).data.tags["mlflow.parentRunId"] == sweep
    # the origin is untouched: its artifacts are still its own, in its own sweep
    assert tracker.client.get_run(origin_id).data.tags.get("mlflow.parentRunId") is None

    # a hollow copy made by an older ragbench (params, metrics, tags): the next copy comes from its origin
    hollow = tracker.start_run(run_name="topk=5 #0", parent_run_id=sweep,
                               tags={"ragbench.role": "job", "ragbench.job_hash": "h",
                                     REUSED_FROM: origin_id})
    tracker.log_params(hollow, {"retrieval.topk": 5})
    tracker.log_metrics(hollow, {"answer/f1": 0.5, "retrieval/recall_at_5": 0.75, CURVE: 0.75})
    tracker.end_run(hollow, "FINISHED")
    again = tracker.copy_run(tracker.client.get_run(hollow), run_name="topk=5 #2", parent_run_id=sweep,
                             tags={REUSED_FROM: origin_id})
    _looks_alike(tracker.client, again, origin_id, tmp_path / "downloads")
