"""FinanceBench adapter: pages_only sample counts against the raw jsonl, the PDF corpus, bad input."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from ragbench.datasets.base import bundled_sample
from ragbench.datasets.financebench import FinanceBenchAdapter
from ragbench.errors import ConfigError, DatasetError

QUESTIONS = "data/financebench_open_source.jsonl"
DOCS = "data/financebench_document_information.jsonl"


def raw(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / QUESTIONS).read_text(encoding="utf-8").splitlines() if line]


def load(root: Path | None = None, **kw):
    return FinanceBenchAdapter(name="financebench", path=str(root) if root else None, **kw).load()


def test_counts_by_type_match_raw_jsonl():
    rows = raw(bundled_sample("financebench"))
    es = load()
    assert Counter(q.question_type for q in es.queries) == Counter(r["question_type"] for r in rows)
    assert Counter(q.question_type for q in es.queries) == {
        "metrics-generated": 10, "domain-relevant": 10, "novel-generated": 10}
    assert len(es.documents) == len({r["doc_name"] for r in rows}) == 27
    assert all(q.answerable for q in es.queries)


def test_pages_only_corpus_is_the_distinct_evidence_pages_and_is_tagged():
    rows = raw(bundled_sample("financebench"))
    es = load()
    pages = {(e["doc_name"], e["evidence_page_num"]) for r in rows for e in r["evidence"]}
    got = {(d.doc_id, int(s.ref)) for d in es.documents for s in d.sections}
    assert got == pages and len(pages) == 35
    assert es.tags["corpus"] == "pages_only" and "inflated" in es.tags["corpus_warning"]
    doc = next(d for d in es.documents if d.doc_id == rows[0]["doc_name"])
    page = rows[0]["evidence"][0]
    assert doc.sections[0].paragraphs[0].text == page["evidence_text_full_page"]
    assert doc.sections[0].title == f"Page {page['evidence_page_num'] + 1}"


def test_evidence_carries_page_ref_and_quote():
    rows = raw(bundled_sample("financebench"))
    q = next(q for q in load().queries if q.qid == rows[0]["financebench_id"])
    ev = rows[0]["evidence"][0]
    assert q.evidence[0].ref == str(ev["evidence_page_num"]) and q.evidence[0].text == ev["evidence_text"]
    assert q.evidence[0].doc_id == rows[0]["doc_name"] and q.doc_ids == (rows[0]["doc_name"],)
    assert q.answers == (rows[0]["answer"],)
    assert sum(len(q.evidence) for q in load().queries) == 37


def _with_pdfs(root: Path, pdf, *, skip: str | None = None, corrupt: str | None = None) -> None:
    rows = raw(root)
    last = {}
    for r in rows:
        for e in r["evidence"]:
            last[r["doc_name"]] = max(last.get(r["doc_name"], 0), e["evidence_page_num"])
    (root / "pdfs").mkdir()
    for name, top in last.items():
        if name == skip:
            continue
        data = b"%PDF-1.4 truncated" if name == corrupt else pdf([f"{name} page {i}" for i in range(top + 2)])
        (root / "pdfs" / f"{name}.pdf").write_bytes(data)


def test_pdf_corpus_pages_are_sections_with_zero_based_refs(sample_copy, pdf):
    root = sample_copy("financebench")
    _with_pdfs(root, pdf)
    (root / "pdfs" / "UNREFERENCED_2020_10K.pdf").write_bytes(b"corrupt, but no question refers to it")
    es = load(root)
    assert es.tags == {"corpus": "pdfs"}
    amex = next(d for d in es.documents if d.doc_id == "AMERICANEXPRESS_2022_10K")
    assert [s.ref for s in amex.sections] == [str(i) for i in range(len(amex.sections))]
    assert amex.sections[3].paragraphs[0].text == "AMERICANEXPRESS_2022_10K page 3"
    assert amex.sections[3].title == "Page 4"
    assert len(es.queries) == 30 and es.stats["pdf_unreadable"] == 0
    assert len(es.files) == 2 + 27  # both jsonl files and every PDF are hashed


def test_unreadable_and_missing_pdfs_are_skipped_and_counted(sample_copy, pdf):
    root = sample_copy("financebench")
    _with_pdfs(root, pdf, skip="PEPSICO_2023_8K_dated-2023-05-30", corrupt="AMERICANEXPRESS_2022_10K")
    es = load(root)
    assert es.stats["pdf_unreadable"] == 1 and es.stats["pdf_missing"] == 1
    assert es.stats["qa_skipped_no_document"] == 5  # 3 AmEx + 2 PepsiCo questions
    assert len(es.queries) == 25 and len(es.documents) == 25


def test_pages_only_can_be_forced_even_with_pdfs(sample_copy, pdf):
    root = sample_copy("financebench")
    _with_pdfs(root, pdf)
    assert load(root, corpus="pages_only").tags["corpus"] == "pages_only"


def test_corpus_pdfs_without_folder_is_an_error():
    with pytest.raises(DatasetError, match="corpus=pdfs but the pdfs/ folder does not exist"):
        load(corpus="pdfs")


def _error(root: Path, **kw) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        load(root, **kw)
    assert "dataset 'financebench'" in str(info.value) and "fix:" in str(info.value)
    return info.value


def test_missing_file(sample_copy):
    root = sample_copy("financebench")
    (root / DOCS).unlink()
    assert _error(root).file.endswith("financebench_document_information.jsonl")


def test_invalid_json_line(sample_copy):
    root = sample_copy("financebench")
    p = root / QUESTIONS
    lines = p.read_text(encoding="utf-8").splitlines()
    lines[4] = lines[4][:100]
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    err = _error(root)
    assert "invalid JSON on line 5" in str(err) and err.record == "line 5"


def test_wrong_line_type(sample_copy):
    root = sample_copy("financebench")
    (root / DOCS).write_text('["AES_2022_10K"]\n', encoding="utf-8")
    assert "expected an object" in str(_error(root))


def test_invalid_utf8(sample_copy):
    root = sample_copy("financebench")
    p = root / QUESTIONS
    p.write_bytes(p.read_bytes().replace(b"Activision", b"Activ\xe9sion", 1))
    assert "invalid UTF-8" in str(_error(root))


def test_missing_required_field(sample_copy):
    root = sample_copy("financebench")
    p = root / QUESTIONS
    rows = raw(root)
    del rows[2]["evidence"][0]["evidence_page_num"]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    err = _error(root)
    assert err.field == "evidence_page_num" and err.record.startswith("line 3")


def test_question_referencing_missing_document(sample_copy):
    root = sample_copy("financebench")
    p = root / DOCS
    lines = p.read_text(encoding="utf-8").splitlines()
    p.write_text("\n".join(line for line in lines if "AES_2022_10K" not in line) + "\n", encoding="utf-8")
    err = _error(root)
    assert err.field == "doc_name" and "AES_2022_10K" in str(err)


def test_empty_corpus(sample_copy):
    root = sample_copy("financebench")
    (root / QUESTIONS).write_text("", encoding="utf-8")
    assert "corpus is empty" in str(_error(root))


def test_bad_corpus_option():
    with pytest.raises(ConfigError, match="dataset.corpus"):
        FinanceBenchAdapter(name="financebench", corpus="full")
