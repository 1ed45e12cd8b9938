"""The custom format's forms, as a table (the style of test_bad_input.py): where a title comes from and whether it
is indexed, how relevance names a document (id, file name, stem, quote), questions without answers, evidence
that matches nothing or only partly. Each case is a tiny folder and one named outcome: a one-line error with its
fix, a counted handling, the indexed title, or the documents judged relevant."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ragbench.datasets.custom import CustomAdapter
from ragbench.errors import DatasetError, RagbenchError
from ragbench.types import EvalSet

FERRY = "# Ferry\n\nThe ferry leaves the north pier at 7:15 every weekday.\n"
NOTES = "The lighthouse keeper logs the weather at noon.\n"
ANSWERED = {"question": "When does the ferry leave?", "answers": ["7:15"]}


@dataclass(frozen=True)
class Error:
    """A named error: its type, a phrase of the message, and a phrase of the fix it names."""

    kind: type[RagbenchError]
    phrase: str
    fix: str


@dataclass(frozen=True)
class Counted:
    """The load succeeds with ``stats[key] == value``; ``warned``: the line printed on the terminal."""

    key: str
    value: int
    warned: str | None = None


@dataclass(frozen=True)
class Title:
    """The document's title, the first paragraph (where an indexed title is), and whether it is indexed."""

    doc_id: str
    title: str
    first: str
    indexed: bool


@dataclass(frozen=True)
class Relevant:
    """The first question's evidence as (document, grade) pairs, and the dataset's evidence level."""

    docs: tuple[tuple[str | None, int], ...]
    level: str


@dataclass(frozen=True)
class NoGold:
    """The question loads without a gold answer (scored on retrieval only)."""

    qid: str


Outcome = Error | Counted | Title | Relevant | NoGold
Setup = Callable[[Path], None]


def folder(*rows: dict[str, Any], files: dict[str, str] | None = None, corpus: list[dict[str, Any]] | None = None,
           raw_qa: str | None = None) -> Setup:
    """A folder with ferry.md and notes.txt (or ``files``), a qa.jsonl of ``rows`` (or ``raw_qa``), and optionally
    a corpus.jsonl of ``corpus`` lines."""
    def make(root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        for name, text in (files if files is not None else {"ferry.md": FERRY, "notes.txt": NOTES}).items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
        if corpus is not None:
            (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus), encoding="utf-8")
        qa = raw_qa if raw_qa is not None else "".join(json.dumps(r) + "\n" for r in (rows or (ANSWERED,)))
        (root / "qa.jsonl").write_text(qa, encoding="utf-8")
    return make


SCIFACT = [{"id": "4983", "title": "Microstructural development of human newborn cerebral white matter",
            "text": "Alterations of the architecture of cerebral white matter in the developing human brain."},
           {"id": "5836", "title": "Induction of myelodysplasia", "text": "Myelodysplastic syndromes are disorders."}]
CORPUS = {"corpus_file": "corpus.jsonl"}

CASES: list[tuple[str, Setup, dict[str, Any], Outcome]] = [
    # ---- where a title comes from, and whether it is indexed (prepended to the first paragraph, as BEIR does)
    ("title-md-first-heading", folder(), {},
     Title("ferry.md", "Ferry", "Ferry The ferry leaves the north pier at 7:15 every weekday.", True)),
    ("title-front-matter-md", folder(files={"ferry.md": '---\ntitle: "Pier timetable"\ndate: 2024-01-02\ntags:\n'
                                                        "  - ferry\n---\n# Ferry\n\nThe ferry leaves at 7:15.\n"}),
     {}, Title("ferry.md", "Pier timetable", "Pier timetable The ferry leaves at 7:15.", True)),
    ("title-front-matter-txt", folder(files={"log.txt": "---\ntitle: Lighthouse log\n---\nThe keeper logs at noon.\n"}),
     {}, Title("log.txt", "Lighthouse log", "Lighthouse log The keeper logs at noon.", True)),
    ("title-txt-is-its-stem-not-indexed", folder(), {},
     Title("notes.txt", "notes", "The lighthouse keeper logs the weather at noon.", False)),
    ("title-a-rule-is-not-front-matter", folder(files={"rule.txt": "---\nJust a rule above prose.\n---\nMore prose.\n"}),
     {}, Title("rule.txt", "rule", "--- Just a rule above prose. --- More prose.", False)),
    ("title-jsonl-corpus", folder(corpus=SCIFACT), CORPUS,
     Title("4983", SCIFACT[0]["title"], f"{SCIFACT[0]['title']} {SCIFACT[0]['text']}", True)),
    ("title-jsonl-corpus-beir-ids", folder(corpus=[{"_id": "d1", "title": "Tides", "text": "High tide at six."}]),
     CORPUS, Title("d1", "Tides", "Tides High tide at six.", True)),
    ("title-jsonl-corpus-without-title", folder(corpus=[{"id": "d1", "text": "High tide at six."}]), CORPUS,
     Title("d1", "d1", "High tide at six.", False)),
    ("title-jsonl-corpus-title-not-a-string", folder(corpus=[{"id": "d1", "title": 7, "text": "x"}]), CORPUS,
     Error(DatasetError, "line 1, field 'title': expected str, found int", 'write "title" as a string')),
    ("jsonl-corpus-without-text", folder(corpus=[{"id": "d1", "title": "Tides"}]), CORPUS,
     Error(DatasetError, "field 'text': required field is missing", 'add "text" (str) to that record')),
    # ---- relevance: a document by its id, file name or stem; a quote
    ("relevance-file-name-string", folder({**ANSWERED, "evidence": ["ferry.md"]}), {},
     Relevant((("ferry.md", 1),), "document")),
    ("relevance-stem-string", folder({**ANSWERED, "evidence": ["ferry"]}), {}, Relevant((("ferry.md", 1),), "document")),
    ("relevance-doc-id-object-graded", folder({**ANSWERED, "evidence": [{"doc_id": "notes.txt", "relevance": 2}]}), {},
     Relevant((("notes.txt", 2),), "document")),
    ("relevance-bare-ref-names-a-document", folder({**ANSWERED, "evidence": [{"ref": "notes"}]}), {},
     Relevant((("notes.txt", 1),), "document")),
    ("relevance-doc-ids-alone", folder({**ANSWERED, "doc_ids": ["ferry.md", "notes.txt"]}), {},
     Relevant((("ferry.md", 1), ("notes.txt", 1)), "document")),
    ("relevance-jsonl-corpus-id", folder({**ANSWERED, "evidence": ["4983"]}, corpus=SCIFACT), CORPUS,
     Relevant((("4983", 1),), "document")),
    ("relevance-quote", folder({**ANSWERED, "evidence": ["leaves the north pier"]}), {},
     Relevant((("ferry.md", 1),), "passage")),
    ("relevance-mixed-is-passage-level", folder({**ANSWERED, "evidence": ["ferry.md"]},
                                                {**ANSWERED, "evidence": ["logs the weather at noon"]}), {},
     Relevant((("ferry.md", 1),), "passage")),
    ("relevance-ambiguous-stem", folder({**ANSWERED, "evidence": ["notes"]},
                                        files={"notes.txt": NOTES, "notes.md": "# Notes\n\nTide tables.\n"}), {},
     Error(DatasetError, "'notes' is ambiguous: ['notes.md', 'notes.txt']", "name a file below")),
    ("relevance-missing-document", folder({**ANSWERED, "evidence": [{"doc_id": "pier.md"}]}), {},
     Error(DatasetError, "no document 'pier.md' in the corpus", "dataset.missing_documents=ignore")),
    ("relevance-missing-corpus-id", folder({**ANSWERED, "doc_ids": ["9999"]}, corpus=SCIFACT), CORPUS,
     Error(DatasetError, "no document '9999' in the corpus", "name a document by its id in")),
    # ---- answers may be left out (retrieval only); a blank answer is still refused
    ("no-answers-key", folder({"id": "r1", "question": "When does the ferry leave?", "evidence": ["ferry.md"]}), {},
     NoGold("r1")),
    ("no-answers-nothing-dropped", folder({"question": "When?", "evidence": ["ferry.md"]}), {},
     Counted("qa_dropped_no_gold", 0)),
    ("empty-answers-still-refused", folder({"question": "When?", "answers": [], "evidence": ["ferry.md"]}), {},
     Error(DatasetError, "an answerable question needs a non-empty gold answer", 'leave "answers" out')),
    ("neither-evidence-nor-answers", folder({"question": "When?"}), {},
     Error(DatasetError, "neither evidence nor answers", '"answers"')),
    # ---- evidence that matches nothing stops the load; a partial match is counted and printed
    ("no-quote-matches", folder({**ANSWERED, "evidence": ["the bus leaves at noon"]},
                                {**ANSWERED, "evidence": [{"text": "a tram", "doc_id": "ferry.md"}]}), {},
     Error(DatasetError, "the evidence of none of the 2 questions matches a document (first: line 1 "
           "'the bus leaves at noon')", "copy quotes verbatim from the documents, or name documents")),
    ("no-ref-matches", folder({**ANSWERED, "evidence": [{"ref": "pier.md#s0.p0"}, {"ref": "page-99"}]}), {},
     Error(DatasetError, "the evidence of none of the 1 questions matches a document", '"doc_ids": ["file.md"]')),
    ("partial-match-counted-and-printed", folder({**ANSWERED, "evidence": ["the bus leaves at noon"]},
                                                 {**ANSWERED, "evidence": ["leaves the north pier"]}), {},
     Counted("qa_evidence_not_found", 1, "the evidence of 1 of 2 questions matches no document (first: line 1")),
    ("soft-match-counts-as-found", folder({**ANSWERED, "evidence": ["the ferry leaves the south pier at 7:15"]}), {},
     Counted("qa_evidence_not_found", 0)),
    ("chunk-id-ref-of-a-known-document", folder({**ANSWERED, "evidence": [{"ref": "ferry.md#s0.p0"}]}), {},
     Counted("evidence_not_found", 0)),
    # ---- a user's own file: the fix says how to correct it (never "official" or "re-download")
    ("own-file-invalid-json", folder(raw_qa='{"question": "q?", "answers": ["a"]\n'), {},
     Error(DatasetError, "invalid JSON on line 1", "correct line 1: one JSON object per line")),
    ("own-file-not-an-object", folder(raw_qa='["q?"]\n'), {},
     Error(DatasetError, "line 1 is a JSON list, expected an object", "write one JSON object ({...}) per line")),
    ("own-file-missing-question", folder(raw_qa='{"answers": ["a"]}\n'), {},
     Error(DatasetError, "field 'question': required field is missing", 'add "question" (str) to that record')),
    ("own-file-question-not-a-string", folder(raw_qa='{"question": 3, "answers": ["a"]}\n'), {},
     Error(DatasetError, "field 'question': expected str, found int", 'write "question" as a str')),
    ("own-file-bad-evidence-item", folder({**ANSWERED, "evidence": [{"relevance": 2}]}), {},
     Error(DatasetError, "an evidence item must be a string or an object with 'text', 'ref' or 'doc_id'",
           '{"doc_id": "file.md", "relevance": 2}')),
    ("own-file-duplicate-id", folder({**ANSWERED, "id": "x"}, {**ANSWERED, "id": "x"}), {},
     Error(DatasetError, "question id 'x' occurs 2 times", "give every record its own id")),
]


def _load(root: Path, kwargs: dict[str, Any]) -> tuple[CustomAdapter, EvalSet]:
    adapter = CustomAdapter(name="custom", path=str(root), **kwargs)
    return adapter, adapter.load()


@pytest.mark.parametrize(("setup", "kwargs", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_custom_forms(setup: Setup, kwargs: dict[str, Any], expected: Outcome, tmp_path: Path,
                      caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "kb"
    setup(root)
    if isinstance(expected, Error):
        with pytest.raises(expected.kind) as info:
            _load(root, kwargs)
        message = str(info.value)
        first, _, fix = message.partition("\n  fix: ")
        assert expected.phrase in first, message
        assert "\n" not in first and "\n" not in fix, message  # one line of error, one of fix
        assert expected.fix in fix, message
        assert "official" not in message and "re-download" not in message, message  # the user's own file
        return
    with caplog.at_level(logging.WARNING):
        adapter, es = _load(root, kwargs)
    if isinstance(expected, Counted):
        assert es.stats[expected.key] == expected.value, dict(es.stats)
        if expected.warned:
            assert expected.warned in caplog.text
    elif isinstance(expected, Title):
        doc = next(d for d in es.documents if d.doc_id == expected.doc_id)
        assert doc.title == expected.title
        assert doc.sections[0].paragraphs[0].text == expected.first
        assert doc.meta["title_indexed"] is expected.indexed
        assert all("title:" not in p.text for s in doc.sections for p in s.paragraphs)  # front matter is not text
    elif isinstance(expected, Relevant):
        q = es.queries[0]
        assert tuple((ev.doc_id, ev.relevance) for ev in q.evidence) == expected.docs
        assert adapter.evidence_level == expected.level
    else:
        q = next(q for q in es.queries if q.qid == expected.qid)
        assert q.answers == () and q.answerable


def test_title_is_indexed_by_every_chunker(tmp_path: Path) -> None:
    from ragbench.ingest.document import DocumentChunker
    from ragbench.ingest.hierarchical import HierarchicalChunker
    from ragbench.types import Level

    folder(files={"ferry.md": FERRY, "log.txt": "---\ntitle: Lighthouse log\n---\nThe keeper logs at noon.\n"})(tmp_path)
    _, es = _load(tmp_path, {})
    for chunker in (HierarchicalChunker(), HierarchicalChunker(search_level="paragraph"), DocumentChunker()):
        tree = chunker.chunk(es.documents)
        searched = " | ".join(c.text for c in tree.chunks.values() if c.level == tree.search_level)
        assert "Ferry The ferry leaves" in searched and "Lighthouse log The keeper" in searched, chunker
        assert tree.search_level in (Level.SENTENCE, Level.PARAGRAPH)


def test_document_relevance_maps_onto_chunks_and_document_metrics(tmp_path: Path) -> None:
    """Relevance named per document matches the chunks (the document node) and yields retrieval/doc/*."""
    from ragbench.evidence import EvidenceMatcher
    from ragbench.ingest.hierarchical import HierarchicalChunker
    from ragbench.judge.document import case_document_scores
    from ragbench.types import Hit

    folder({**ANSWERED, "evidence": ["ferry"]})(tmp_path)
    adapter, es = _load(tmp_path, {})
    tree = HierarchicalChunker().chunk(es.documents)
    q = es.queries[0]
    emap = EvidenceMatcher(tree).match(q)
    assert emap.how == ("id",) and emap.anchors == (("ferry.md",),)
    notes = next(c for c in tree.chunks.values() if c.doc_id == "notes.txt" and c.level == tree.search_level)
    ferry = next(c for c in tree.chunks.values() if c.doc_id == "ferry.md" and c.level == tree.search_level)
    hits = [Hit(notes.chunk_id, 1.0, 1), Hit(ferry.chunk_id, 0.5, 2)]
    scores = case_document_scores(adapter, tree, emap, q, hits, 5)
    assert scores["retrieval/doc/recall_at_1"] == 0.0 and scores["retrieval/doc/recall_at_5"] == 1.0
    assert scores["retrieval/doc/mrr_at_10"] == 0.5
    assert case_document_scores(adapter, tree, emap, q, hits, 5, scope="document") == {}  # own documents only
