"""log.per_query=true in a real job: one line per question, each saying what the job's record says."""

from __future__ import annotations

import logging

import pytest

from ragbench.record import CaseRecord
from ragbench.tracking.per_query import line
from tests.fixtures.jobs import run_job

pytestmark = pytest.mark.slow


def test_one_log_line_per_question_from_the_record(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="ragbench.per_query")
    run, client = run_job(["dataset=qasper", "dataset.max_queries=4", "retrieval=bm25", "retrieval.topk=3",
                           "stages=retrieval", "log.per_query=true", f"cache.dir={tmp_path / 'cache'}"], tmp_path)
    assert run.info.status == "FINISHED"
    logged = [r.getMessage() for r in caplog.records if r.name == "ragbench.per_query"]
    path = client.download_artifacts(run.info.run_id, "cases.jsonl", str(tmp_path / "dl"))
    with open(path, encoding="utf-8") as f:
        cases = [CaseRecord.from_json(text) for text in f if text.strip()]
    assert len(logged) == len(cases) == 4
    assert logged == [line(c, 3) for c in cases]
    assert all(" recall@3=" in m and " hit_rank=" in m for m in logged)


def test_off_by_default(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="ragbench.per_query")
    run_job(["dataset=qasper", "dataset.max_queries=2", "retrieval=bm25", "stages=retrieval",
             f"cache.dir={tmp_path / 'cache'}"], tmp_path)
    assert not [r for r in caplog.records if r.name == "ragbench.per_query"]
