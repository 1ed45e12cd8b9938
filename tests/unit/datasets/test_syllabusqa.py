"""SyllabusQA adapter on the bundled sample: counts against the raw files, evidence, bad input."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from ragbench.datasets.base import bundled_sample
from ragbench.datasets.syllabusqa import SyllabusQAAdapter
from ragbench.errors import ConfigError, DatasetError

# Written out here, independently of the adapter's own table.
SLUG = {"single factual": "single_factual", "multi factual": "multi_factual", "single reasoning": "single_reasoning",
        "multi reasoning": "multi_reasoning", "summarization": "summarization", "yes/no": "yes_no",
        "no answer": "no_answer"}


def raw_rows(root: Path, split: str) -> list[dict[str, str]]:
    with (root / f"data/dataset_split/{split}.csv").open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def load(**kw) -> object:
    return SyllabusQAAdapter(name="syllabusqa", **kw).load()


@pytest.mark.parametrize("split", ["train", "val", "test"])
def test_counts_by_type_match_raw_csv(split):
    root = bundled_sample("syllabusqa")
    rows = raw_rows(root, split)
    es = load(split=split)
    assert Counter(q.question_type for q in es.queries) == Counter(SLUG[r["question_type"]] for r in rows)
    assert {d.doc_id for d in es.documents} == {r["syllabus_name"] for r in rows}
    assert len(es.queries) == len(rows)


def test_sample_totals():
    es = load(split="all")
    assert len(es.documents) == 4
    assert len(es.queries) == 279  # 126 train + 69 val + 84 test (SOURCE.md)
    counts = Counter(q.question_type for q in es.queries)
    assert counts["no_answer"] == 39 and all(v == 40 for t, v in counts.items() if t != "no_answer")
    assert sum(not q.answerable for q in es.queries) == 39


def test_json_split_reads_the_same_questions():
    a, b = load(split="all"), load(split="all", split_format="json")
    assert [(q.qid, q.question_type, q.answers, q.evidence) for q in a.queries] == \
        [(q.qid, q.question_type, q.answers, q.evidence) for q in b.queries]
    assert a.fingerprint != b.fingerprint  # different bytes read


def test_evidence_is_spans_then_reasoning_steps():
    root = bundled_sample("syllabusqa")
    data = json.loads((root / "data/dataset_split/train.json").read_text(encoding="utf-8"))
    row = next(r for r in data if r["question_type"] == "multi reasoning")
    q = next(q for q in load(split="train").queries if q.qid == row["id"])
    steps = [row[f"reasoning_step_{i}"] for i in range(1, 6) if row[f"reasoning_step_{i}"]]
    assert [e.text for e in q.evidence] == steps
    assert all(e.doc_id == row["syllabus_name"] for e in q.evidence)
    summ = next(r for r in data if r["question_type"] == "summarization")
    q = next(q for q in load(split="train").queries if q.qid == summ["id"])
    assert [e.text for e in q.evidence] == [summ[f"answer_span_{i}"] for i in range(1, 6) if summ[f"answer_span_{i}"]]
    assert q.meta["evidence_kinds"].startswith("answer_span")


def test_no_answer_is_unanswerable_with_published_answer():
    q = next(q for q in load().queries if q.question_type == "no_answer")
    assert not q.answerable and q.answers == ("No/insufficient information",) and q.evidence == ()


def test_mac_roman_text_is_decoded_and_paragraphed():
    es = load(split="train")
    bio = next(d for d in es.documents if d.doc_id == "Syllabus Bio 544 lecture S23")
    assert "You\u2019ll also have lab quizzes" in bio.text  # 0xD5 in Mac OS Roman is a right quote
    assert "\r" not in bio.text and "\n\n" in bio.text
    assert es.stats["syllabi_mac_roman"] == 2


def test_word_syllabi_keep_headings():
    es = load(syllabus_format="word")
    (doc,) = es.documents
    assert "# Objectives" in doc.text
    assert len(es.queries) == 84


def test_only_the_split_syllabi_are_read_so_other_corrupt_files_do_not_block(sample_copy):
    root = sample_copy("syllabusqa")
    (root / "data/dataset_split/train.csv").write_bytes(b"\x00garbage")
    (root / "syllabi/syllabi_redacted/text/Syllabus Bio 544 lecture S23.txt").unlink()
    (root / "syllabi/syllabi_redacted/word/Legal 297BL Syllabus.docx").write_bytes(b"not a zip")
    es = SyllabusQAAdapter(name="syllabusqa", path=str(root), split="test").load()
    assert len(es.queries) == 84
    assert es.files == ("data/dataset_split/test.csv", "syllabi/syllabi_redacted/text/Legal 297BL Syllabus.txt")


def test_unreadable_docx_is_skipped_and_counted(sample_copy):
    root = sample_copy("syllabusqa")
    (root / "syllabi/syllabi_redacted/word/Syllabus Bio 544 lecture S23.docx").write_bytes(b"PK\x03\x04broken")
    es = SyllabusQAAdapter(name="syllabusqa", path=str(root), split="train", syllabus_format="word").load()
    assert es.stats["syllabi_unreadable"] == 1
    assert es.stats["qa_skipped_unreadable_syllabus"] == 70
    assert [d.doc_id for d in es.documents] == ["Sch Mgmt 652 Syllabus - Fully OnLine"]
    assert len(es.queries) == 56


def _error(root: Path, **kw) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        SyllabusQAAdapter(name="syllabusqa", path=str(root), **kw).load()
    assert "dataset 'syllabusqa'" in str(info.value) and "fix:" in str(info.value)
    return info.value


def test_missing_folder(tmp_path):
    err = _error(tmp_path / "nowhere")
    assert "dataset.path does not exist" in str(err)


def test_missing_split_file(sample_copy):
    root = sample_copy("syllabusqa")
    (root / "data/dataset_split/test.csv").unlink()
    err = _error(root)
    assert err.file.endswith("test.csv") and "file not found" in str(err)


def test_invalid_utf8(sample_copy):
    root = sample_copy("syllabusqa")
    (root / "data/dataset_split/test.csv").write_bytes(b"id,syllabus_name\n\xff\xfe,x\n")
    assert "invalid UTF-8" in str(_error(root))


def test_invalid_csv_truncated_inside_a_quoted_field(sample_copy):
    root = sample_copy("syllabusqa")
    p = root / "data/dataset_split/test.csv"
    data = p.read_bytes()
    p.write_bytes(data[: data.index(b',"') + 10])  # cut right after an opening quote
    assert "invalid CSV: unexpected end of data" in str(_error(root))


def test_invalid_csv_stray_quote(sample_copy):
    root = sample_copy("syllabusqa")
    p = root / "data/dataset_split/test.csv"
    p.write_text(p.read_text(encoding="utf-8").replace(',"', ',"x"y', 1), encoding="utf-8")
    assert "invalid CSV" in str(_error(root))


def test_invalid_csv_row_with_extra_fields(sample_copy):
    root = sample_copy("syllabusqa")
    p = root / "data/dataset_split/test.csv"
    lines = p.read_text(encoding="utf-8").split("\n")
    p.write_text(lines[0] + "\nabc,Legal 297BL Syllabus,yes/no,Q?,A,,,,,,,,,,,EXTRA\n", encoding="utf-8")
    err = _error(root)
    assert "invalid CSV" in str(err) and err.record.startswith("row 1")


def test_missing_csv_column(sample_copy):
    root = sample_copy("syllabusqa")
    p = root / "data/dataset_split/test.csv"
    p.write_text(p.read_text(encoding="utf-8").replace("question_type,", "qtype,", 1), encoding="utf-8")
    assert _error(root).field == "question_type"


def test_invalid_json(sample_copy):
    root = sample_copy("syllabusqa")
    (root / "data/dataset_split/test.json").write_text('[{"id": "x",', encoding="utf-8")
    assert "invalid JSON" in str(_error(root, split_format="json"))


def test_wrong_top_level_type(sample_copy):
    root = sample_copy("syllabusqa")
    (root / "data/dataset_split/test.json").write_text('{"rows": []}', encoding="utf-8")
    assert "top level is a JSON dict" in str(_error(root, split_format="json"))


def test_missing_required_field(sample_copy):
    root = sample_copy("syllabusqa")
    p = root / "data/dataset_split/test.json"
    rows = json.loads(p.read_text(encoding="utf-8"))
    del rows[3]["question"]
    p.write_text(json.dumps(rows), encoding="utf-8")
    err = _error(root, split_format="json")
    assert err.field == "question" and err.record == "#3"


def test_question_referencing_missing_syllabus(sample_copy):
    root = sample_copy("syllabusqa")
    (root / "syllabi/syllabi_redacted/text/Legal 297BL Syllabus.txt").unlink()
    err = _error(root)
    assert err.field == "syllabus_name" and "Legal 297BL Syllabus" in str(err) and err.record.startswith("#0")


def test_empty_split_is_an_error(sample_copy):
    root = sample_copy("syllabusqa")
    p = root / "data/dataset_split/test.csv"
    p.write_text(p.read_text(encoding="utf-8").split("\n")[0] + "\n", encoding="utf-8")
    assert "corpus is empty" in str(_error(root))


def test_bad_option():
    with pytest.raises(ConfigError, match="dataset.split='dev'"):
        SyllabusQAAdapter(name="syllabusqa", split="dev")
