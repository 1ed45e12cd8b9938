"""Issue 38.1: the sweep's readers read each job's record (``run.json``), not MLflow's params and metrics: the
sweep table, ``sweep_comparison.json``, ``runs.csv``, the sweep's accounting, resume and the objective. Each
test edits a record and sees its reader change, or fail with one line naming the run and the file. The
MLflow runs here carry no params or metrics at all (``tests.fixtures.record_runs``): every number shown
must come from a record. No MLflow store is opened."""

from __future__ import annotations

import csv
import io
import logging
from typing import Any

import pytest
from omegaconf import OmegaConf

from ragbench.errors import ConfigError, Reported
from ragbench.sweep import MlflowSweepCallback
from ragbench.tracking.report import console
from ragbench.tracking.run_names import write_sweep_keys
from ragbench.tracking.run_records import read_all, recorded
from ragbench.tracking.runs_table import csv_text, record_rows
from tests.fixtures import record_runs


class SweepTracker:
    """The parent run's side of a sweep's end, in memory."""

    uri = "file:///nowhere"

    def __init__(self, client: record_runs.RecordClient, runs: list[Any]) -> None:
        self.client, self.runs = client, runs
        self.files: dict[str, str] = {}
        self.metrics: dict[str, float] = {}
        self.ended: list[str] = []

    def search_children(self, parent: str) -> list[Any]:
        return list(self.runs)

    def log_table(self, run_id: str, rows: Any, name: str) -> None:
        self.table = list(rows)

    def log_files(self, run_id: str, files: dict[str, str], artifact_path: str | None = None) -> None:
        self.files.update(files)

    def log_metrics(self, run_id: str, metrics: dict[str, float]) -> None:
        self.metrics.update(metrics)

    def end_run(self, run_id: str, status: str) -> None:
        self.ended.append(status)

    def experiment_id(self) -> str:
        raise RuntimeError("no MLflow here")  # the UI link is skipped with a warning


def _sweep(tmp_path, f1=(0.4, 0.6)) -> tuple[record_runs.RecordClient, list[Any]]:
    client = record_runs.RecordClient(tmp_path / "artifacts")
    runs = []
    for i, (topk, value) in enumerate(zip((3, 5), f1, strict=True)):
        run_id = f"r{i}"
        client.put(run_id, record_runs.record(
            f"topk={topk} #{i}", config={"dataset": {"name": "d"}, "retrieval": {"topk": topk}},
            metrics={"answer/f1": value, "retrieval/mrr_at_10": 0.5, "cases/total": 2.0, "cases/failed": 0.0,
                     "tokens/prompt": 100.0 * (i + 1)}))
        runs.append(record_runs.run(run_id, f"topk={topk} #{i}", start=i))
    return client, runs


def _end(tmp_path, client, runs) -> tuple[SweepTracker, str]:
    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir(exist_ok=True)
    write_sweep_keys(sweep_dir, ["retrieval.topk=3,5"])
    cfg = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep_dir)},
                                      "overrides": {"task": ["retrieval.topk=3,5"]}}})
    callback = MlflowSweepCallback(compare_report=False)
    tracker = SweepTracker(client, runs)
    callback._tracker, callback._run_id = tracker, "parent"
    with console.capture() as shown:
        callback.on_multirun_end(cfg)
    return tracker, shown.get()


def _csv(tracker: SweepTracker) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(tracker.files["runs.csv"])))


def test_an_untampered_sweep_shows_its_records_numbers(tmp_path):
    client, runs = _sweep(tmp_path)
    tracker, shown = _end(tmp_path, client, runs)
    rows = _csv(tracker)
    assert [(r["retrieval.topk"], r["answer/f1"], r["status"]) for r in rows] == [("3", "0.4", "FINISHED"),
                                                                                 ("5", "0.6", "FINISHED")]
    assert [r["run"] for r in tracker.table] == ["topk=5 #1", "topk=3 #0"]  # best answer/f1 first
    assert tracker.metrics["sweep/jobs"] == 2 and tracker.metrics["sweep/failed_jobs"] == 0
    assert tracker.metrics["tokens/prompt"] == 300.0  # the accounting: summed over the records
    assert "0.6000" in shown and "0.4000" in shown and tracker.ended == ["FINISHED"]


def test_an_edited_metric_changes_the_table_the_csv_and_the_accounting(tmp_path):
    client, runs = _sweep(tmp_path)
    client.edit("r0", metrics={"answer/f1": 0.99, "retrieval/mrr_at_10": 0.5, "cases/total": 2.0,
                               "cases/failed": 0.0, "tokens/prompt": 1000.0})
    tracker, shown = _end(tmp_path, client, runs)
    assert [r["answer/f1"] for r in _csv(tracker)] == ["0.99", "0.6"]
    assert [r["run"] for r in tracker.table] == ["topk=3 #0", "topk=5 #1"]  # the edit now ranks first
    assert tracker.table[0]["answer/f1"] == 0.99
    assert "0.9900" in shown and "0.4000" not in shown
    assert tracker.metrics["tokens/prompt"] == 1200.0


def test_an_edited_config_changes_the_csv_and_table_params(tmp_path):
    client, runs = _sweep(tmp_path)
    client.edit("r1", config={"dataset": {"name": "d"}, "retrieval": {"topk": 7}})
    tracker, _ = _end(tmp_path, client, runs)
    assert [r["retrieval.topk"] for r in _csv(tracker)] == ["3", "7"]
    assert '"retrieval.topk": "7"' in tracker.files["sweep_comparison.json"]  # text, as MLflow params


def test_an_edited_status_counts_the_job_as_failed(tmp_path):
    client, runs = _sweep(tmp_path)
    client.edit("r1", status="FAILED")
    with pytest.raises(Reported):
        _end(tmp_path, client, runs)


@pytest.mark.parametrize(("damage", "said"), [
    (lambda text: text[:300], "is cut off (the file is truncated)"),
    (lambda text: "[]", "is an array, not a ragbench-run/2 record"),
    (lambda text: text.replace('"answer/f1": 0.6', '"answer/f1": "0.6"'), "metric 'answer/f1' is a string"),
], ids=["truncated", "not-a-record", "mistyped"])
def test_a_damaged_record_fails_the_sweep_with_one_line(tmp_path, caplog, damage, said):
    client, runs = _sweep(tmp_path)
    path = client.root / "r1" / "run.json"
    path.write_text(damage(path.read_text()))
    with caplog.at_level(logging.ERROR), pytest.raises(Reported):
        tracker, _ = _end(tmp_path, client, runs)
    [line] = [r.getMessage() for r in caplog.records if "run.json" in r.getMessage()]
    assert line.startswith("run r1 (topk=5 #1): run.json") and said in line and "fix: rerun" in line
    assert "\n" not in line


def test_a_finished_run_without_its_record_is_failed_and_named(tmp_path):
    client, runs = _sweep(tmp_path)
    (client.root / "r1" / "run.json").unlink()
    [_, missing] = recorded(client, runs)
    assert missing.status == "FAILED" and "FINISHED in MLflow but has no run.json" in str(missing.problem)
    with pytest.raises(ConfigError, match="run r1 "):  # compare --csv: one line, exit 2
        read_all(client, runs)
    failed = record_runs.run("r2", status="FAILED")  # failed before its record opened: as MLflow ended it
    [row] = recorded(client, [failed])
    assert (row.status, row.problem, dict(row.metrics)) == ("FAILED", None, {})


def test_runs_csv_reads_a_resumed_copys_origin_record(tmp_path):
    client, runs = _sweep(tmp_path)
    copy = record_runs.run("c0", "topk=3 #4", tags={"ragbench.reused_from": "r0"})  # no artifacts of its own
    [row] = record_rows(recorded(client, [copy]))
    got = (row["run_name"], row["metrics"]["answer/f1"], row["params"]["retrieval.topk"])
    assert got == ("topk=3 #4", 0.4, "3")
    assert csv_text([row]).splitlines()[1].startswith("c0,topk=3 #4,FINISHED,")


# resume and the objective (Job.run): tests/unit/test_job.py's ResumingTracker holds one earlier run


def _resumed(tmp_path, edit=None, raw: str | None = None, missing: bool = False):
    from ragbench.job import Job
    from tests.unit.test_job import CFG, COMPONENTS, ResumingTracker, _finish

    tracker = ResumingTracker({"ragbench.stages": "all"}, tmp_path / "artifacts", metrics={"answer/f1": 0.25})
    tracker.done.data.metrics = {"answer/f1": 0.125}  # what MLflow says: never read
    if edit:
        tracker.client.edit("old", **edit)
    if raw is not None:
        tracker.client.put("old", raw)
    if missing:
        (tracker.client.root / "old" / "run.json").unlink()
    job = Job(CFG, tracker, name="#0 x", parent="p", multirun=True,  # type: ignore[arg-type]
              folder=tmp_path / "record")
    return job.run(_finish, COMPONENTS), tracker  # type: ignore[arg-type]


@pytest.fixture
def _hash(monkeypatch):
    from ragbench import job as job_module

    monkeypatch.setattr(job_module, "job_hash", lambda resolved: "h" * 16)
    monkeypatch.setattr("ragbench.job.start_tags",
                        lambda cfg, components: {"ragbench.stages": "all"})


def test_a_resumed_jobs_objective_is_its_records(tmp_path, _hash):
    value, tracker = _resumed(tmp_path)
    assert value == 0.25 and tracker.copies == ["old"]  # the record's, not MLflow's 0.125
    value, _ = _resumed(tmp_path / "edited", edit={"metrics": {"answer/f1": 0.875}})
    assert value == 0.875


def test_a_fresh_jobs_objective_is_its_records(tmp_path, _hash):
    from ragbench.job import Job
    from tests.unit.test_job import CFG, COMPONENTS, RecordingTracker, _finish

    job = Job(CFG, RecordingTracker(), name="#0 x", parent="p", multirun=True,  # type: ignore[arg-type]
              folder=tmp_path / "record")
    assert job.run(_finish, COMPONENTS) == 0.75  # type: ignore[arg-type]  # work returned 0.5


@pytest.mark.parametrize(("edit", "raw", "said"), [
    ({"status": "FAILED"}, None, "says status FAILED, not this job finished"),
    ({"job_hash": "other"}, None, "says job hash other, not this job finished"),
    (None, '{"format": "ragbench-run/2", "name": "x"', "is cut off (the file is truncated)"),
], ids=["not-finished", "another-job", "truncated"])
def test_resume_runs_the_job_again_when_the_record_does_not_say_finished(tmp_path, _hash, caplog, edit, raw,
                                                                         said):
    with caplog.at_level(logging.INFO):
        value, tracker = _resumed(tmp_path, edit=edit, raw=raw)
    assert tracker.copies == [] and tracker.ended == [("run-1", "FINISHED")]  # it ran, in its own run
    assert value == 0.75  # its own record's objective
    [line] = [r.getMessage() for r in caplog.records if "not resumed from it" in r.getMessage()]
    assert "run old (old)" in line and said in line


def test_resume_without_a_record_runs_the_job_again(tmp_path, _hash, caplog):
    with caplog.at_level(logging.INFO):
        value, tracker = _resumed(tmp_path, missing=True)
    assert tracker.copies == [] and value == 0.75
    assert "run old (old) has no run.json (record): not resumed from it" in caplog.text


def test_a_record_on_this_disk_is_read_in_place(tmp_path):
    """A local artifact store: run.json read from the run's artifact folder (no client call); a copy's
    folder holds hard links to its origin's, an older copy's none (then the client reads the origin's)."""
    client, runs = _sweep(tmp_path)
    folder = client.root / "r0"
    here = record_runs.run("r0", "topk=3 #0")
    here.info.artifact_uri = folder.as_uri()
    nowhere = record_runs.RecordClient(tmp_path / "empty")  # the client holds nothing: only the disk is read
    record_of_here = recorded(nowhere, [here])[0]
    assert record_of_here.metrics["answer/f1"] == 0.4
    client.edit("r0", metrics={"answer/f1": 0.91})
    assert recorded(nowhere, [here])[0].metrics["answer/f1"] == 0.91
    (folder / "run.json").write_text("{")
    assert "run.json is cut off" in str(recorded(nowhere, [here])[0].problem)
    (folder / "run.json").unlink()
    assert "has no run.json" in str(recorded(nowhere, [here])[0].problem)
    old_copy = record_runs.run("c1", "topk=5 #3", tags={"ragbench.reused_from": "r1"})
    old_copy.info.artifact_uri = str(tmp_path / "copy-without-artifacts")
    assert recorded(client, [old_copy])[0].metrics["answer/f1"] == 0.6
