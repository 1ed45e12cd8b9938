"""``record.case_row``: a case line as its row, as a comparison reads it (``compare.select.case_rows``) without
building a ``CaseRecord``: the same row ``CaseRecord.from_json(line).row()`` gives, for a line of today's layout
and of the layout before ``record_version``, and the same ``RecordError`` for a damaged line."""

from __future__ import annotations

import json

import pytest

from ragbench.compare.select import case_rows
from ragbench.errors import ConfigError
from ragbench.judge.lexical import LexicalJudge
from ragbench.pipeline import Pipeline
from ragbench.record import CASE_FIELDS, CaseRecord, RecordError, case_line, case_record, case_row
from ragbench.retrieval.bm25 import BM25Retriever
from tests.fixtures.toy import toy_components


@pytest.fixture(scope="module")
def lines() -> list[str]:
    comps = toy_components(retriever=BM25Retriever(), judges={"lexical": LexicalJudge(dataset="toy")})
    result = Pipeline(comps).run()
    return [case_line(case_record(c, result.tree, result.evidence.get(c.query.qid), dataset="toy", topk=2))
            for c in result.cases]


def test_the_row_is_the_records_row(lines):
    for line in lines:
        assert case_row(line) == CaseRecord.from_json(line).row() == json.loads(line)
        assert case_row(line.encode()) == case_row(line)  # bytes as stored
    assert case_rows("".join(lines), "r1") == [CaseRecord.from_json(line).row() for line in lines]


def test_a_line_from_before_the_case_record_reads_as_the_record_does(lines):
    row = json.loads(lines[0])
    old = json.dumps({k: v for k, v in row.items() if k not in CASE_FIELDS and k != "context_parts"})
    assert case_row(old) == CaseRecord.from_json(old).row()
    assert case_row(old)["context_parts"] == [[] for _ in row["context_ids"]]


@pytest.mark.parametrize("damage", [
    lambda row: {**row, "retrieved_ids": "c1"},  # a column mistyped
    lambda row: {k: v for k, v in row.items() if k != "status"},  # a column missing
    lambda row: {**row, "qrels": {"chunk": {}}},  # a part of a recomputation field missing
    lambda row: [row],  # not an object
])
def test_a_damaged_line_is_the_same_error(lines, damage):
    line = json.dumps(damage(json.loads(lines[0])))
    with pytest.raises(RecordError) as got:
        case_row(line, where="cases.jsonl line 3")
    with pytest.raises(RecordError) as want:
        CaseRecord.from_json(line, where="cases.jsonl line 3")
    assert str(got.value) == str(want.value) and "cases.jsonl line 3" in str(got.value)
    with pytest.raises(ConfigError, match="line 1.*fix: rerun the job"):
        case_rows(line + "\n", "r1")


def test_a_cut_last_line_says_the_file_is_truncated(lines):
    with pytest.raises(ConfigError, match="line 2 is cut off mid-line"):
        case_rows(lines[0] + lines[1][:40], "r1")
