"""Custom adapter: a folder of .txt/.md/.pdf plus QA JSONL or an EasyRAG evaluation set."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from ragbench.datasets.custom import CustomAdapter
from ragbench.errors import ConfigError, DatasetError
from ragbench.text import NOT_MENTIONED as REFUSAL_GOLD

MD = "# Ferry handbook\n\nThe ferry leaves the north pier at 7:15 every weekday.\n\n## Tickets\n\nDay passes cost 6 euros.\n"
TXT = "Lighthouse notes\n\nThe lighthouse keeper logs the weather at noon and at midnight.\n"


@pytest.fixture
def corpus(tmp_path, pdf) -> Path:
    root = tmp_path / "kb"
    (root / "guides").mkdir(parents=True)
    (root / "ferry.md").write_text(MD, encoding="utf-8")
    (root / "guides" / "lighthouse.txt").write_text(TXT, encoding="utf-8")
    (root / "report.pdf").write_bytes(pdf(["Annual report 2023", "Revenue grew by 12 percent in 2023."]))
    (root / ".hidden").mkdir()
    (root / ".hidden" / "skip.md").write_text("never read", encoding="utf-8")
    (root / "notes.csv").write_text("ignored,file\n", encoding="utf-8")
    return root


def write_jsonl(root: Path, rows: list[dict], name: str = "qa.jsonl") -> None:
    (root / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def load(root: Path, **kw):
    return CustomAdapter(name="custom", path=str(root), **kw).load()


ROWS = [
    {"question": "When does the ferry leave?", "answers": ["7:15"], "question_type": "single_hop_fact",
     "evidence": ["The ferry leaves the north pier at 7:15 every weekday."]},
    {"question": "When is the weather logged?", "answers": "at noon and at midnight",
     "evidence": [{"text": "logs the weather at noon", "doc_id": "lighthouse.txt", "relevance": 3}]},
    {"question": "How much did revenue grow?", "answers": ["12 percent"], "question_type": "single_hop_fact",
     "doc_ids": ["report.pdf"], "evidence": [{"ref": "2", "doc_id": "report"}]},
    {"question": "Who built the pier?", "answers": [], "answerable": False, "question_type": "unanswerable"},
]


def test_documents_of_every_kind(corpus):
    write_jsonl(corpus, ROWS)
    es = load(corpus)
    docs = {d.doc_id: d for d in es.documents}
    assert sorted(docs) == ["ferry.md", "guides/lighthouse.txt", "report.pdf"]
    ferry, light = docs["ferry.md"], docs["guides/lighthouse.txt"]
    # the .md first heading is its title, indexed with the first paragraph (a heading alone opens a section
    # whose title no searched chunk carries); a .txt has no title in its text: the stem names it, unindexed
    assert ferry.title == "Ferry handbook" and ferry.meta["title_indexed"]
    assert [[p.text for p in s.paragraphs] for s in ferry.sections] == [
        ["Ferry handbook The ferry leaves the north pier at 7:15 every weekday."], ["Day passes cost 6 euros."]]
    assert [s.title for s in ferry.sections] == ["Ferry handbook", "Ferry handbook > Tickets"]
    assert light.title == "lighthouse" and not light.meta["title_indexed"]
    assert [p.text for s in light.sections for p in s.paragraphs] == [
        "Lighthouse notes", "The lighthouse keeper logs the weather at noon and at midnight."]
    pdf_doc = docs["report.pdf"]
    assert [s.ref for s in pdf_doc.sections] == ["1", "2"]
    assert pdf_doc.sections[1].paragraphs[0].text == "Revenue grew by 12 percent in 2023."


def test_jsonl_questions(corpus):
    write_jsonl(corpus, ROWS)
    es = load(corpus)
    q0, q1, q2, q3 = es.queries
    assert Counter(q.question_type for q in es.queries) == {"single_hop_fact": 2, "general": 1, "unanswerable": 1}
    assert q0.qid == "q1" and q0.evidence[0].doc_id == "ferry.md" and q0.doc_ids == ("ferry.md",)
    assert es.stats["evidence_doc_inferred"] == 1
    assert q1.qid == "q2" and q1.answers == ("at noon and at midnight",)
    assert q1.evidence[0].relevance == 3 and q1.doc_ids == ("guides/lighthouse.txt",)
    assert q2.evidence[0].ref == "2" and q2.evidence[0].text is None and q2.doc_ids == ("report.pdf",)
    assert not q3.answerable and q3.answers == (REFUSAL_GOLD,) and q3.evidence == ()


EASYRAG = [
    {"id": "qa_001", "question": "When does the ferry leave?", "reference_answer": "At 7:15 on weekdays.",
     "evidence": [{"document_id": "ferry.md", "node_id": "ferry:sec1:p1:s1",
                   "quote": "The ferry leaves the north pier at 7:15 every weekday.", "relevance": 3},
                  {"document_id": "ferry.md", "node_id": "ferry:sec2:p1:s1", "quote": "Day passes cost 6 euros.",
                   "relevance": 1},
                  {"document_id": "ferry.md", "node_id": "ferry:sec2:p1:s2", "quote": "Tickets", "relevance": 0}],
     "difficulty": "easy", "question_type": "single_hop_fact", "answerable": True},
    {"id": "qa_002", "question": "Who built the pier?", "reference_answer": None, "evidence": [],
     "difficulty": "easy", "question_type": "unanswerable", "answerable": False},
]


def test_easyrag_evaluation_set_with_graded_relevance(corpus):
    (corpus / "eval_dataset.json").write_text(json.dumps(EASYRAG, ensure_ascii=False), encoding="utf-8")
    es = load(corpus, qa_file="eval_dataset.json")
    q1, q2 = es.queries
    assert [(e.text, e.relevance, e.doc_id) for e in q1.evidence] == [
        ("The ferry leaves the north pier at 7:15 every weekday.", 3, "ferry.md"),
        ("Day passes cost 6 euros.", 1, "ferry.md")]  # relevance 0 = irrelevant: not gold
    assert q1.meta["difficulty"] == "easy" and q1.meta["evidence_irrelevant"] == 1
    assert q1.answers == ("At 7:15 on weekdays.",) and q1.qid == "qa_001"
    assert not q2.answerable and q2.answers == (REFUSAL_GOLD,) and q2.question_type == "unanswerable"


def test_easyrag_object_with_samples(corpus):
    (corpus / "eval.json").write_text(json.dumps({"samples": EASYRAG}), encoding="utf-8")
    assert len(load(corpus, qa_file="eval.json").queries) == 2


def test_unreadable_pdf_skipped_and_counted_with_its_questions(corpus):
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj <<")
    write_jsonl(corpus, ROWS + [{"question": "x?", "answers": ["y"], "doc_ids": ["broken.pdf"]}])
    es = load(corpus)
    assert es.stats["pdf_unreadable"] == 1 and es.stats["qa_skipped_unreadable_document"] == 1
    assert len(es.documents) == 3 and len(es.queries) == 4


def _error(root: Path, **kw) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        load(root, **kw)
    assert "dataset 'custom'" in str(info.value) and "fix:" in str(info.value)
    return info.value


def test_path_is_required():
    with pytest.raises(DatasetError, match="needs dataset.path"):
        CustomAdapter(name="custom").load()


def test_missing_qa_file(corpus):
    assert _error(corpus).file.endswith("qa.jsonl")


def test_missing_docs_folder(corpus):
    write_jsonl(corpus, ROWS)
    assert "documents folder does not exist" in str(_error(corpus, docs_dir="nope"))


def test_empty_corpus(tmp_path):
    write_jsonl(tmp_path, ROWS)
    assert "corpus is empty" in str(_error(tmp_path))


def test_invalid_json_line(corpus):
    (corpus / "qa.jsonl").write_text('{"question": "a", "answers": []}\n{"question": \n', encoding="utf-8")
    assert _error(corpus).record == "line 2"


def test_wrong_top_level_of_easyrag_file(corpus):
    (corpus / "eval.json").write_text('"just a string"', encoding="utf-8")
    assert "expected an array of samples" in str(_error(corpus, qa_file="eval.json"))


def test_invalid_utf8_document(corpus):
    write_jsonl(corpus, ROWS)
    (corpus / "latin.txt").write_bytes("caf\u00e9 au lait".encode("latin-1"))
    err = _error(corpus)
    assert "invalid utf-8" in str(err) and err.file.endswith("latin.txt")
    assert any(d.doc_id == "latin.txt" for d in load(corpus, text_encoding="auto").documents)


def test_missing_required_field(corpus):
    write_jsonl(corpus, [{"question": "no answers key"}])  # answers may be left out, but then evidence is needed
    err = _error(corpus)
    assert err.field == "answers" and "neither evidence nor answers" in str(err)


def test_missing_field_in_easyrag(corpus):
    bad = [dict(EASYRAG[0])]
    del bad[0]["answerable"]
    (corpus / "eval.json").write_text(json.dumps(bad), encoding="utf-8")
    assert _error(corpus, qa_file="eval.json").field == "answerable"


def test_question_referencing_missing_document(corpus):
    write_jsonl(corpus, [{"question": "q", "answers": ["a"], "doc_ids": ["handbook.md"]}])
    err = _error(corpus)
    assert err.field == "doc_ids" and "handbook.md" in str(err)
    es = load(corpus, missing_documents="ignore")
    assert es.stats["missing_documents_ignored"] == 1 and es.queries[0].doc_ids == ()


def test_bad_relevance(corpus):
    write_jsonl(corpus, [{"question": "q", "answers": ["a"], "evidence": [{"text": "t", "relevance": "high"}]}])
    assert _error(corpus).field == "relevance"


def test_bad_option():
    with pytest.raises(ConfigError, match="qa_format"):
        CustomAdapter(name="custom", path="/x", qa_format="csv")
