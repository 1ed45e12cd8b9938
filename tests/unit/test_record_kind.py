"""A record's ``kind`` (a job's or a calibration's), a calibration's case lines, and the migration of a
calibration run logged before its record (``case_scores.json`` only), all in ``ragbench.record``."""

from __future__ import annotations

import json

import pytest

from ragbench.compare.runcases import scores_document
from ragbench.judge.labels import LabelledItem
from ragbench.record import (
    CASES_ARTIFACT,
    LEGACY_SCORES,
    RecordError,
    RunRecord,
    case_line,
    item_record,
    stored_cases,
)


def test_a_record_written_before_the_kind_field_reads_as_a_job():
    record = RunRecord(name="x", job_hash="h", config={}, kind="calibration")
    assert RunRecord.from_json(record.to_json()).kind == "calibration"
    old = json.loads(record.to_json())
    del old["kind"]
    assert RunRecord.from_json(json.dumps(old)).kind == "job"
    with pytest.raises(ValueError, match="kind 'sweep' is not one of job, calibration"):
        RunRecord(name="x", job_hash="h", config={}, kind="sweep")


ITEM = LabelledItem(item_id="q1", question="Why?", answer="Because.", contexts=(("t", "p"), ("u", "more")),
                    gold=("a", "b"), question_type="why", generator="openai/gen", labels={"faithfulness": 1})
ROW = {"qid": "q1", "question_type": "why", "status": "ok", "generator": "openai/gen",
       "human/faithfulness": 1, "verdict/faithfulness": 0, "calibration/faithfulness/agree": 0.0,
       "judge/faithfulness": 0.5, "probe/position/delta": 0.25}


def test_a_labelled_item_is_a_case_line_holding_every_number_of_its_row():
    line = case_line(item_record(ITEM, ROW))
    row = json.loads(line)
    assert {k: row[k] for k in ROW} == ROW
    assert row["question"] == "Why?" and row["answer"] == "Because." and row["gold"] == "a | b"
    assert row["context_ids"] == ["q1#0", "q1#1"] and row["record_version"] == 1
    source, rows = stored_cases({CASES_ARTIFACT: line.encode()})  # read back by the one case-line reader
    assert source == CASES_ARTIFACT and rows == [row]


def test_a_calibration_logged_before_its_record_is_migrated_to_case_lines():
    rows = [ROW, {**ROW, "qid": "q2", "status": "failed", "judge/faithfulness": None}]
    doc = json.dumps(scores_document([{k: v for k, v in r.items() if v is not None} for r in rows])).encode()
    source, migrated = stored_cases({LEGACY_SCORES: doc})
    assert source == LEGACY_SCORES
    numbers = {k for k, v in ROW.items() if isinstance(v, int | float)}
    assert [{k: r.get(k) for k in ("qid", "status", *numbers)} for r in migrated] == [
        {k: r.get(k) for k in ("qid", "status", *numbers)} for r in rows]
    with pytest.raises(RecordError, match="case_scores.json is not a case-scores document"):
        stored_cases({LEGACY_SCORES: b'{"qid": ["a"], "fields": {"x": [1, 2]}}'})
    with pytest.raises(RecordError, match="neither cases.jsonl nor case_scores.json"):
        stored_cases({CASES_ARTIFACT: None})
