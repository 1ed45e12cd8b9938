"""Qasper adapter (the lead's): answer types counted from the raw file, floats, split choice, bad input."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from ragbench.datasets.base import bundled_sample
from ragbench.datasets.qasper import QasperAdapter
from ragbench.errors import DatasetError

FILE = "qasper-train-v0.3.json"


def raw() -> dict:
    return json.loads((bundled_sample("qasper") / FILE).read_text(encoding="utf-8"))


def first_type(answer: dict) -> str:
    """Answer type of one annotation, written out here independently of the adapter."""
    if answer["unanswerable"]:
        return "unanswerable"
    if answer["extractive_spans"]:
        return "extractive"
    if answer["free_form_answer"]:
        return "abstractive"
    if answer["yes_no"] is not None:
        return "boolean"
    return "unanswerable"


def load(root: Path | None = None, **kw):
    return QasperAdapter(name="qasper", path=str(root) if root else None, **kw).load()


def test_counts_by_type_match_raw_file():
    data = raw()
    expected = Counter(first_type(qa["answers"][0]["answer"]) for p in data.values() for qa in p["qas"])
    es = load()
    assert Counter(q.question_type for q in es.queries) == expected == {"abstractive": 9, "extractive": 7, "boolean": 2}
    assert len(es.documents) == 3 and len(es.queries) == 18
    assert es.stats["annotations"] == 24


def test_one_gold_answer_per_distinct_annotation():
    data = raw()
    es = load()
    qa = next(qa for p in data.values() for qa in p["qas"] if len(qa["answers"]) > 1)
    q = next(q for q in es.queries if q.qid == qa["question_id"])
    assert 1 <= len(q.answers) <= len(qa["answers"])
    assert q.meta["answer_types"].count(",") == len(qa["answers"]) - 1


def test_figure_captions_are_paragraphs_and_float_evidence_is_unprefixed():
    es = load()
    paper = next(d for d in es.documents if d.doc_id == "1909.00694")
    floats = next(s for s in paper.sections if s.title == "Figures and tables")
    assert len(floats.paragraphs) == 6
    texts = {p.text for s in paper.sections for p in s.paragraphs}
    evidence = [e.text for q in es.queries if q.doc_ids == ("1909.00694",) for e in q.evidence]
    assert evidence and not any(e.startswith("FLOAT SELECTED") for e in evidence)
    assert all(e in texts for e in evidence)


def test_other_splits_are_not_read(tmp_path):
    shutil.copy(bundled_sample("qasper") / FILE, tmp_path / FILE)
    (tmp_path / "qasper-dev-v0.3.json").write_bytes(b"\xff corrupt")
    es = load(tmp_path)
    assert es.files == (FILE,) and len(es.queries) == 18
    with pytest.raises(DatasetError, match="invalid UTF-8"):
        load(tmp_path, split="dev")
    with pytest.raises(DatasetError, match="file not found"):
        load(tmp_path, split="test")


@pytest.mark.parametrize(("content", "message"), [
    (b'{"1909.00694": {"title": ', "invalid JSON"),
    (b'[{"title": "x"}]', "expected a JSON object"),
    (b'{"p1": {"title": "t", "full_text": [], "qas": [{"question": "q?"}]}}', "required field is missing"),
])
def test_bad_files(tmp_path, content, message):
    (tmp_path / FILE).write_bytes(content)
    with pytest.raises(DatasetError) as info:
        load(tmp_path)
    assert message in str(info.value) and "dataset 'qasper'" in str(info.value)
