"""``ragbench.record``: the run record round-trips through ``run.json``; the writer appends each case as it
comes (a job stopped part way keeps the cases it did), masks secrets, and writes the end state whole."""

from __future__ import annotations

import json

import pytest

from ragbench import redact
from ragbench.record import CASES_ARTIFACT, RUN_FILE, RUN_FORMAT, CaseRecord, RecordWriter, RunRecord


def _case(qid: str, answer: str = "Paris") -> CaseRecord:
    return CaseRecord(qid=qid, question_type="single_hop", answerable=True, question="capital?", gold="Paris",
                      answer=answer, status="ok", error_type=None, error=None, retrieved_ids=["c1", "c2"],
                      retrieved_scores=[0.9, 0.5], context_ids=["c1"], context_parts=[[]], citations=[],
                      prompt_tokens=0, completion_tokens=0, scores={"answer/f1": 1.0},
                      latency_ms={"retrieve": 1.5}, fields={"record_version": 1, "ranked_ids": ["c1", "c2"]})


def test_a_record_round_trips_through_its_file():
    record = RunRecord(name="topk=5 #0", job_hash="h", config={"retrieval": {"topk": 5}}, metrics={"answer/f1": 0.5},
                       curves={"retrieval/recall_at_k_curve": {1: 0.25, 5: 0.75}}, files_read=("a.json",),
                       status="FINISHED")
    again = RunRecord.from_json(record.to_json())
    assert again == record and json.loads(record.to_json())["format"] == RUN_FORMAT


def test_a_file_of_another_layout_is_refused():
    with pytest.raises(ValueError, match=RUN_FORMAT):
        RunRecord.from_json('{"format": "ragbench-run/1"}')


def test_each_case_is_on_disk_as_soon_as_it_is_written(tmp_path):
    writer = RecordWriter(tmp_path, RunRecord(name="x", job_hash="h", config={}))
    assert RunRecord.from_json((tmp_path / RUN_FILE).read_text()).status == "RUNNING"
    writer.case(_case("q1"))
    writer.case(_case("q2"))
    # read before the writer finished (a job killed here keeps these two cases)
    rows = [json.loads(line) for line in (tmp_path / CASES_ARTIFACT).read_text().splitlines()]
    assert [r["qid"] for r in rows] == ["q1", "q2"]
    assert rows[0]["answer/f1"] == 1.0 and rows[0]["latency/retrieve_ms"] == 1.5 and rows[0]["ranked_ids"] == ["c1", "c2"]
    assert "ranked_ids" not in writer.table[0] and writer.table[0]["answer/f1"] == 1.0
    writer.finish(writer.record.ended("KILLED"))
    assert RunRecord.from_json((tmp_path / RUN_FILE).read_text()).status == "KILLED"
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_secret_never_reaches_the_record(tmp_path):
    secret = "sk-live-0123456789abcdefghijklmnop-record"
    redact.register(secret)
    writer = RecordWriter(tmp_path, RunRecord(name="x", job_hash="h", config={"note": secret}))
    writer.case(_case("q1", answer=f"the key is {secret}"))
    writer.finish(writer.record.ended("FINISHED"))
    for name in (RUN_FILE, CASES_ARTIFACT):
        assert secret not in (tmp_path / name).read_text()
