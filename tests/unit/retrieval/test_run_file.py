"""retrieval=run_file: a TREC run scored as hits; one named error per kind of bad run file; export's lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragbench.errors import ConfigError
from ragbench.export import qrels_lines, run_lines
from ragbench.retrieval.run_file import QueryBoundRetriever, RunFileError, RunFileRetriever, read_run
from ragbench.types import Query

IDS = ["a#d", "b#d", "c#d", "x#s0.p0.t0", "x#s0.p0.t1"]  # three single-unit documents, one document of two chunks


def _q(qid: str, text: str) -> Query:
    return Query(qid=qid, text=text, answers=(), question_type="query")


def _retriever(tmp_path: Path, text: str) -> RunFileRetriever:
    path = tmp_path / "run.txt"
    path.write_text(text)
    r = RunFileRetriever(path=str(path))
    r.bind([_q("q1", "first question"), _q("q2", "second question")])
    r.build(ids=IDS, texts=IDS)
    return r


def test_hits_follow_the_rank_column_and_map_document_ids(tmp_path: Path) -> None:
    r = _retriever(tmp_path, "q1 Q0 c 2 0.5 sys\nq1 Q0 a 1 0.9 sys\nq1 Q0 x#s0.p0.t1 3 0.1 sys\n")
    assert isinstance(r, QueryBoundRetriever)
    hits = r.search(texts=["first question", "second question"], k=10)
    assert [(h.chunk_id, h.rank, h.score) for h in hits[0]] == [("a#d", 1, 0.9), ("c#d", 2, 0.5),
                                                                ("x#s0.p0.t1", 3, 0.1)]
    assert hits[1] == []  # a question the run does not list has no hit
    assert [h.chunk_id for h in r.search(texts=["first question"], k=2)[0]] == ["a#d", "c#d"]
    assert r.params()["run_file"] == RunFileRetriever(path=str(tmp_path / "run.txt")).params()["run_file"]


@pytest.mark.parametrize(("text", "match"), [
    ("q1 Q0 a 1 0.9\n", r"line 1: 5 columns, expected 6 \(qid Q0 id rank score tag\)"),
    ("q1 Q0 a 1 0.9 sys\nq1 Q0 b 1 0.8 sys\n", r"line 2: duplicate rank 1 for question 'q1' \(also 'a'\)"),
    ("q1 Q0 a 1 0.9 sys\nq1 Q0 a 2 0.8 sys\n", r"line 2: id 'a' is ranked twice for question 'q1'"),
    ("q1 Q0 a one 0.9 sys\n", r"line 1: rank 'one' must be an integer"),
])
def test_bad_lines_are_named(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(RunFileError, match=match):
        _retriever(tmp_path, text)


def test_unknown_ids_are_named(tmp_path: Path) -> None:
    with pytest.raises(RunFileError, match=r"2 ids name no searchable chunk .*first: 'nope'.*chunker=document"):
        _retriever(tmp_path, "q1 Q0 nope 1 1 s\nq1 Q0 x 2 1 s\nq1 Q0 a 3 1 s\n")  # x has two chunks: ambiguous


def test_missing_path_and_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="retrieval.path=RUN_FILE"):
        RunFileRetriever(path=None).bind([_q("q1", "first question")])
    with pytest.raises(RunFileError, match="does not exist"):
        read_run(tmp_path / "none.txt")


def test_a_searched_text_that_is_no_question(tmp_path: Path) -> None:
    r = _retriever(tmp_path, "q1 Q0 a 1 1 s\n")
    with pytest.raises(RunFileError, match="needs query=none"):
        r.search(texts=["a rewritten question"], k=3)


def test_export_lines_read_back_as_the_same_ranking(tmp_path: Path) -> None:
    rows = [{"qid": "q1", "ranked_ids": ["b#d", "a#d", "x#s0.p0.t0", "x#s0.p0.t1"],
             "ranked_doc_ids": ["q1", "b", "x", "x"], "doc_qrels": {"x": 2, "a": 0}, "doc_ignore": ["q1"],
             "qrels": {"chunk": {"x#s0.p0.t0": 2}}, "evidence": {"matched": True}}]
    assert run_lines(rows, "doc") == ["q1 Q0 b 1 2 ragbench", "q1 Q0 x 2 1 ragbench"]  # self hit ignored
    assert qrels_lines(rows, "doc") == ["q1 0 x 2", "q1 0 a 0"]
    (tmp_path / "run.txt").write_text("\n".join(run_lines(rows, "chunk")) + "\n")
    assert [rid for rid, _ in read_run(tmp_path / "run.txt")["q1"]] == rows[0]["ranked_ids"]


def _bind(tmp_path: Path, text: str, qids: list[str]) -> RunFileRetriever:
    path = tmp_path / "run.txt"
    path.write_text(text)
    r = RunFileRetriever(path=str(path))
    r.bind([_q(qid, f"question {qid}") for qid in qids])
    return r


def test_an_empty_run_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RunFileError, match=r"run\.txt holds no run line; fix: write one line per retrieved"):
        _bind(tmp_path, "\n\n", ["q1", "q2"])


def test_a_run_of_other_question_ids_is_refused_with_the_count(tmp_path: Path) -> None:
    with pytest.raises(RunFileError, match=r"ranks none of the dataset's 3 questions; its ids look like '1', "
                                           r"the dataset's like 'q1'; fix: put the dataset's question ids"):
        _bind(tmp_path, "1 Q0 a 1 1 s\n2 Q0 b 1 1 s\n", ["q1", "q2", "q3"])


def test_a_run_missing_many_questions_warns_with_the_count(tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    qids = [f"q{i}" for i in range(1, 11)]
    _bind(tmp_path, "".join(f"q{i} Q0 a 1 1 s\n" for i in range(1, 10)), qids)  # 1 of 10 unranked: at 10%
    assert not caplog.records
    _bind(tmp_path, "".join(f"q{i} Q0 a 1 1 s\n" for i in range(1, 9)) + "x Q0 a 1 1 s\n", qids)
    (record,) = caplog.records
    assert record.levelname == "WARNING"
    assert record.getMessage().startswith(f"run file {tmp_path / 'run.txt'} ranks nothing for 2 of 10 "
                                          "questions (first: 'q9'); they score 0; its ids look like 'x'")
