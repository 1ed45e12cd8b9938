"""``python -m ragbench.verify`` on damaged case artifacts, as a table: a cases.jsonl cut mid-line, bytes
that are not UTF-8, a row that is a number or ``{}``, 100,000 nested brackets, a field missing or of the
wrong type, a deleted case_scores.json. Each is one named line (exit 1: the run cannot be checked; 2: a
usage error), never a traceback and never "OK". The store is replaced by the artifacts' bytes
(``fetch_run``)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from ragbench import verify
from ragbench.compare.runcases import scores_document
from ragbench.judge.lexical import LexicalJudge
from ragbench.pipeline import Pipeline
from ragbench.record import case_record
from ragbench.retrieval.bm25 import BM25Retriever
from ragbench.tracking.mlflow_tracker import mlflow_name
from tests.fixtures.toy import toy_components

RUN = "0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def artifacts() -> verify.RunArtifacts:
    """A toy job's case artifacts as a job stores them (one JSON record per line, each ending in a newline)."""
    comps = toy_components(retriever=BM25Retriever(), judges={"lexical": LexicalJudge(dataset="toy")})
    result = Pipeline(comps).run()
    rows = [json.loads(json.dumps(case_record(c, result.tree, result.evidence.get(c.query.qid),
                                                                   dataset="toy", topk=2).row(), default=str))
            for c in result.cases]
    cases = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode()
    return verify.RunArtifacts(run_id=RUN, cases=cases, scores=json.dumps(scores_document(rows)).encode(),
                               metrics={mlflow_name(k): v for k, v in result.metrics.items()}, topk=2)


def lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def with_line(n: int, new: bytes) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        parts = lines(data)
        parts[n - 1] = new
        return b"\n".join(parts)
    return change


def edit_row(n: int, change: Callable[[dict], None]) -> Callable[[bytes], bytes]:
    def apply(data: bytes) -> bytes:
        row = json.loads(lines(data)[n - 1])
        change(row)
        return with_line(n, json.dumps(row).encode())(data)
    return apply


def cut_mid_line(data: bytes) -> bytes:
    return data[: data.index(b"\n", data.index(b"\n") + 1) - 7]  # 7 bytes short of line 2's end


def not_utf8(data: bytes) -> bytes:
    second = lines(data)[1]
    return with_line(2, second[:20] + b"\xff\xfe" + second[20:])(data)


def same(data: bytes) -> bytes:
    return data


# (case id, change to cases.jsonl, change to case_scores.json (None: deleted), exit code, phrase)
CASES: list[tuple[str, Callable[[bytes], bytes], Callable[[bytes], bytes | None], int, str]] = [
    ("cut-mid-line", cut_mid_line, same, 1, "cases.jsonl line 2 is cut off mid-line (the file is truncated)"),
    ("not-utf8", not_utf8, same, 1, "cases.jsonl line 2 is not UTF-8 (byte 0xff at column 21)"),
    ("row-a-number", with_line(2, b"42"), same, 1, "cases.jsonl line 2 is a number, not a case record"),
    ("row-an-array", with_line(1, b"[1, 2]"), same, 1, "cases.jsonl line 1 is an array, not a case record"),
    ("row-empty-object", with_line(2, b"{}"), same, 1, "cases.jsonl line 2 is an empty object {}, not a case record"),
    ("row-not-json", with_line(2, b"{'qid': 'q2'}"), same, 1, "cases.jsonl line 2 is not JSON: Expecting property"),
    ("nested-too-deep", with_line(2, b'{"qid": "q2", "x": ' + b"[" * 100_000 + b"}"), same, 1,
     "cases.jsonl line 2 is nested too deep (more than 100 levels of brackets) at column 119"),
    ("field-missing", edit_row(1, lambda r: r.pop("ranked_ids")), same, 1,
     "line 1 (case q1): the case record has no 'ranked_ids'"),
    ("field-mistyped", edit_row(2, lambda r: r.__setitem__("evidence", "x")), same, 1,
     "line 2 (case q2): 'evidence' is a string, expected an object"),
    ("evidence-part-missing", edit_row(2, lambda r: r["evidence"].pop("matched")), same, 1,
     "line 2 (case q2): 'evidence' has no 'matched'"),
    ("topk-a-bool", edit_row(1, lambda r: r.__setitem__("topk", True)), same, 1, "'topk' is true/false, expected a number"),
    ("no-record-version", edit_row(1, lambda r: r.pop("record_version")), same, 2,
     "line 1 (case q1) has no case record (a run logged before ragbench.verify)"),
    ("empty-file", lambda d: b"", same, 2, "cases.jsonl holds no case"),
]


@pytest.mark.parametrize(("change", "change_scores", "code", "phrase"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_damaged_case_file_is_one_named_line(artifacts, monkeypatch, capsys, change, change_scores, code, phrase):
    damaged = verify.RunArtifacts(run_id=RUN, cases=change(artifacts.cases), scores=change_scores(artifacts.scores),
                                  metrics=artifacts.metrics, topk=artifacts.topk)
    monkeypatch.setattr(verify, "fetch_run", lambda run_id, uri: damaged)
    assert verify.main([RUN, "--tracking-uri", "sqlite:///unused.db"]) == code
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "OK" not in out.out
    assert len(out.err.strip().splitlines()) == 1, out.err
    assert phrase in out.err and "fix: " in out.err, out.err
    if code == 1:
        assert "FAILED" in out.err


@pytest.mark.parametrize(("scores", "code", "phrase"), [
    (same, 0, "OK: every metric matches to 1e-9"),
    (lambda d: None, 1, "case_scores.json: missing from the run's artifacts"),  # deleted: said, never "OK"
    (lambda d: b"\xff" + d, 1, "case_scores.json: not a ragbench-case-scores/1 document"),
    (lambda d: d[: len(d) // 2], 1, "case_scores.json: not a ragbench-case-scores/1 document"),
], ids=["intact", "deleted", "not-utf8", "truncated"])
def test_case_scores_file(artifacts, monkeypatch, capsys, scores, code, phrase):
    run = verify.RunArtifacts(run_id=RUN, cases=artifacts.cases, scores=scores(artifacts.scores),
                              metrics=artifacts.metrics, topk=artifacts.topk)
    monkeypatch.setattr(verify, "fetch_run", lambda run_id, uri: run)
    assert verify.main([RUN, "--tracking-uri", "sqlite:///unused.db"]) == code
    out = capsys.readouterr()
    assert phrase in out.out and "Traceback" not in out.err
    assert ("FAILED" in out.out) == (code == 1)
