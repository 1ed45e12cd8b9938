"""``CaseRecord.from_json``, the one reader of ``cases.jsonl`` lines, and ``RunRecord.from_json``'s checks:
a written line reads back as the same record; a line of the layout before ``record_version`` is migrated
(in ``ragbench.record``, nowhere else); every damaged line or ``run.json`` is one ``RecordError`` naming
the file and what is wrong, never a RecursionError, KeyError or TypeError."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ragbench import verify
from ragbench.judge.lexical import LexicalJudge
from ragbench.pipeline import Pipeline
from ragbench.record import (
    CASE_FIELDS,
    RUN_FORMAT,
    CaseRecord,
    RecordError,
    RunRecord,
    case_line,
    case_record,
)
from ragbench.retrieval.bm25 import BM25Retriever
from tests.fixtures.toy import toy_components


@pytest.fixture(scope="module")
def records() -> list[CaseRecord]:
    comps = toy_components(retriever=BM25Retriever(), judges={"lexical": LexicalJudge(dataset="toy")})
    result = Pipeline(comps).run()
    return [case_record(c, result.tree, result.evidence.get(c.query.qid), dataset="toy", topk=2)
            for c in result.cases]


def _plain(record: CaseRecord) -> CaseRecord:
    """``record`` as JSON gives it back (tuples as lists)."""
    return dataclasses.replace(record, fields=json.loads(json.dumps(record.fields)))


def test_a_written_line_reads_back_as_the_same_record(records):
    for record in records:
        again = CaseRecord.from_json(case_line(record))
        assert again == _plain(record) and again.row() == json.loads(case_line(record))
        assert again.version == 1 and again.recompute_problem() is None
        assert CaseRecord.from_json(case_line(record).encode()) == again  # bytes as stored


def test_a_line_from_before_the_case_record_is_migrated(records):
    """Before ``record_version`` a line was the table row only, and before the expander's parts it had no
    ``context_parts``: it reads as a record of version 0 whose contexts are whole chunks."""
    row = json.loads(case_line(records[0]))
    old = {k: v for k, v in row.items() if k not in CASE_FIELDS and k not in
           ("context_parts", "ranked_doc_ids", "topk_texts", "judge_notes")}
    record = CaseRecord.from_json(json.dumps(old))
    assert record.version == 0 and record.context_parts == [[] for _ in record.context_ids]
    assert record.scores == records[0].scores and record.qid == records[0].qid
    assert record.recompute_problem() == "the case record has no 'record_version'"


def _edit(change):
    def apply(row: dict) -> str:
        change(row)
        return json.dumps(row)
    return apply


# (case id, the line, made from a written line's row, phrase of the error)
DAMAGED = [
    ("not-utf8", lambda row: json.dumps(row).encode()[:20] + b"\xff" + json.dumps(row).encode()[20:],
     "is not UTF-8 (byte 0xff at column 21)"),
    ("not-json", lambda row: "{'qid': 'q1'}", "is not JSON: Expecting property name"),
    ("a-number", lambda row: "42", "is a number, not a case record"),
    ("an-array", lambda row: "[1, 2]", "is an array, not a case record"),
    ("empty-object", lambda row: "{}", "is an empty object {}, not a case record"),
    ("nested-too-deep", lambda row: '{"qid": "q1", "x": ' + "[" * 100_000 + "}",
     "is nested too deep (more than 100 levels of brackets) at column 119"),
    ("column-missing", _edit(lambda r: r.pop("question")), "(case q1): the case record has no 'question'"),
    ("column-mistyped", _edit(lambda r: r.__setitem__("answerable", "yes")),
     "(case q1): 'answerable' is a string, expected true/false"),
    ("answer-a-number", _edit(lambda r: r.__setitem__("answer", 3)),
     "(case q1): 'answer' is a number, expected a string or null"),
    ("field-mistyped", _edit(lambda r: r.__setitem__("evidence", "x")),
     "(case q1): 'evidence' is a string, expected an object"),
    ("part-missing", _edit(lambda r: r["qrels"].pop("unit")), "(case q1): 'qrels' has no 'unit'"),
    ("topk-a-bool", _edit(lambda r: r.__setitem__("topk", True)), "'topk' is true/false, expected a number"),
]


@pytest.mark.parametrize(("make", "phrase"), [d[1:] for d in DAMAGED], ids=[d[0] for d in DAMAGED])
def test_a_damaged_line_is_one_named_error(records, make, phrase):
    with pytest.raises(RecordError) as err:
        CaseRecord.from_json(make(json.loads(case_line(records[0]))), where="cases.jsonl line 7")
    message = str(err.value)
    assert message.startswith("cases.jsonl line 7") and phrase in message and "\n" not in message, message


def test_a_line_cut_off_says_the_file_is_truncated(records):
    with pytest.raises(RecordError, match=r"line 3 is cut off mid-line \(the file is truncated\)"):
        CaseRecord.from_json(case_line(records[0])[:-30], where="line 3", cut=True)


def test_verify_keeps_no_case_schema_of_its_own():
    assert not hasattr(verify, "CASE_FIELDS") and not hasattr(verify, "CASE_PARTS")


RECORD = RunRecord(name="topk=2 #0", job_hash="h", config={"retrieval": {"topk": 2}}, status="FINISHED",
                   metrics={"answer/f1": 0.5}, curves={"retrieval/recall_at_k_curve": {1: 0.25, 2: 0.5}})


def _with(**changes) -> str:
    data = json.loads(RECORD.to_json())
    data.update(changes)
    return json.dumps(data)


@pytest.mark.parametrize(("text", "phrase"), [
    (RECORD.to_json()[:300], "run.json is cut off (the file is truncated)"),
    ("[]", "run.json is an array, not a ragbench-run/2 record"),
    ("", "run.json is cut off"),
    (b"\xff{}", "run.json is not UTF-8"),
    ('{"format": "ragbench-run/1"}', "run.json is not a ragbench-run/2 record (its format is 'ragbench-run/1')"),
    (_with(metrics={"answer/f1": "0.99"}), "run.json: metric 'answer/f1' is a string, expected a number"),
    (_with(metrics=[]), "run.json: 'metrics' is an array, expected an object"),
    (_with(config=None), "run.json: 'config' is null, expected an object"),
    (_with(curves={"retrieval/recall_at_k_curve": {"one": 0.5}}), "curve 'retrieval/recall_at_k_curve'"),
    (json.dumps({"format": RUN_FORMAT}), "run.json: the record has no 'name'"),
], ids=["cut-to-300-bytes", "an-array", "empty", "not-utf8", "another-format", "metric-a-string",
        "metrics-an-array", "config-null", "curve-step-not-a-number", "no-name"])
def test_a_run_json_that_is_not_a_record_is_one_named_error(text, phrase):
    with pytest.raises(RecordError) as err:
        RunRecord.from_json(text)
    assert phrase in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_record_still_reads_back():
    assert RunRecord.from_json(RECORD.to_json()) == RECORD
