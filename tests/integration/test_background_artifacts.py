"""A job's case files written by a forked child (``tracking.background_artifacts``, the default) against a
real MLflow store: the same bytes as written in the job's process, the run FINISHED only once they are
in, and FAILED when they cannot be written."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ragbench.tracking import background
from tests.fixtures.jobs import run_job

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not background.can_fork(), reason="fork: Linux only")]
CASE_FILES = ("cases.jsonl", "case_scores.json", "cases_table.json")


def _files(client: Any, run: Any) -> dict[str, bytes]:
    folder = Path(client.download_artifacts(run.info.run_id, ""))
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


JOB = ["dataset=qasper", "dataset.sample_size=6", "retrieval=bm25", "retrieval.topk=5", "stages=retrieval"]


def test_the_child_writes_the_bytes_the_process_writes(tmp_path):
    from ragbench.app import build
    from ragbench.pipeline import Pipeline
    from ragbench.tracking.background import StagedFiles
    from ragbench.tracking.job_log import case_files
    from tests.fixtures.jobs import compose_cfg

    components, cache = build(compose_cfg(JOB, tmp_path))
    result = Pipeline(components, cache=cache).run()
    inline = case_files(result, 5)
    staged = StagedFiles(lambda: case_files(result, 5), fork=True)
    assert staged.pending
    staged.wait()
    assert {p.name: p.read_text(encoding="utf-8") for p in staged.folder.iterdir()} == inline
    assert set(inline) == set(CASE_FILES) and inline["cases.jsonl"].count("\n") == 6
    staged.discard()


def test_a_job_logs_its_case_files_through_the_child(tmp_path):
    run, client = run_job(JOB, tmp_path)  # tracking.background_artifacts=true is the default
    assert run.info.status == "FINISHED"
    files = _files(client, run)
    assert set(CASE_FILES) <= set(files) and files["cases.jsonl"].count(b"\n") == 6
    assert run.data.tags["mlflow.loggedArtifacts"] == '[{"path": "cases_table.json", "type": "table"}]'
    assert len(json.loads(files["cases_table.json"])["data"]) == 6


def test_a_sweep_job_is_finished_once_its_files_are_in_and_failed_when_they_cannot_be(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    from ragbench import lifecycle
    from ragbench.tracking import job_log, sweep
    from ragbench.tracking.mlflow_tracker import MlflowTracker

    parent = os.getpid()
    tracker = MlflowTracker(uri=f"sqlite:///{tmp_path}/mlflow.db", artifact_root=str(tmp_path / "artifacts"),
                            experiment="t")
    sweep_run = tracker.start_run(run_name="sweep", tags={"ragbench.role": "sweep"})
    monkeypatch.setitem(sweep._PARENTS, str(tmp_path), sweep_run)
    monkeypatch.setattr(job_log, "log_job", lambda *args, **kwargs: {})
    monkeypatch.setattr(lifecycle, "start_tags", lambda cfg, components: {})

    def case_files(result: Any, topk: int) -> dict[str, str]:
        if result == "unwritable":  # (a full disk stops the sweep instead: tests/unit/tracking/test_store_faults.py)
            raise PermissionError(13, "Permission denied")
        if os.getpid() == parent:
            raise AssertionError("written in the process, not by the child")
        return {"cases.jsonl": '{"qid": "q1"}\n', "case_scores.json": "{}", "cases_table.json": '{"columns":[],"data":[]}'}

    monkeypatch.setattr(job_log, "case_files", case_files)

    def work(result: str):
        def logs(job: Any, components: Any) -> dict[str, float]:
            job.log_result(result, topk=5, extra_tags={})
            return {}
        return logs

    runs = []
    for n, result in enumerate(["fine", "unwritable"]):
        cfg = OmegaConf.create({"resume": False, "dataset": {"name": f"d{n}"}})
        job = lifecycle.JobRun(cfg, tracker, name=f"#{n}", parent=sweep_run, multirun=True)
        job.run(work(result), SimpleNamespace(generator=None, judges={}))  # type: ignore[arg-type]
        runs.append(job.run_id)
        assert tracker.client.get_run(job.run_id).info.status == "RUNNING"  # its child may still be writing
    assert tracker.client.get_run(runs[0]).info.status == "FINISHED"  # settled when job 1 logged
    lifecycle.settle()
    fine, failed = (tracker.client.get_run(r) for r in runs)
    assert fine.info.status == "FINISHED" and failed.info.status == "FAILED"
    assert failed.data.tags["ragbench.error"] == "PermissionError: [Errno 13] Permission denied"
    assert {f.path for f in tracker.client.list_artifacts(runs[0])} >= set(CASE_FILES)
    assert fine.data.tags["mlflow.loggedArtifacts"] == '[{"path": "cases_table.json", "type": "table"}]'
