"""The user's own corpus: a folder of .txt/.md/.pdf files (or a JSONL corpus file) plus a QA file (JSONL or
EasyRAG JSON)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ragbench.datasets.base import BaseAdapter, FileReader
from ragbench.datasets.customdocs import corpus_documents, md_title, text_document
from ragbench.datasets.customqa import RawEvidence, RawQA, parse_easyrag, parse_jsonl
from ragbench.datasets.customrel import CustomCorpus, check_matched, names_document, shown
from ragbench.datasets.filetext import TEXT_ENCODINGS, UnreadableDocument, decode_text
from ragbench.errors import ConfigError, DatasetError
from ragbench.types import Document, EvalSet, Evidence, OpenVikingQA, Paragraph, Query, Section

log = logging.getLogger(__name__)

DOC_SUFFIXES = (".txt", ".md", ".pdf")
QA_FORMATS = ("auto", "jsonl", "easyrag")
MISSING_DOCUMENTS = ("error", "ignore")
READING = 2  # how documents become text (titles indexed since 2): part of the fingerprint, so cached chunks follow
_md_title = md_title  # kept importable from here


class CustomAdapter(BaseAdapter):
    """Documents: every .txt/.md/.pdf below ``path/docs_dir`` (doc_id = path relative to it; PDFs as one
    section per page, ref = 1-based page number), or the lines of ``corpus_file`` (JSONL: ``id``, ``title``,
    ``text``; doc_id = ``id``). A title (front matter ``title:``, a ``.md`` first heading, a corpus line's
    ``title``) is indexed with the first paragraph. Questions: ``qa_file`` (relative to ``path``).

    Relevance: a quote (located in the corpus: a quote without a document fills the question's doc_ids), a
    ``ref`` (a PDF page, a chunk id), or a whole document named by its id, file name or stem (a string that
    names one, ``{"doc_id": ...}`` alone, or ``doc_ids`` on a question without evidence). When every item names
    a document the dataset is judged per document (``evidence_level``: ``retrieval/doc/*`` metrics). Evidence
    that matches no document is counted and warned about; when none of it matches, the load stops.
    Question ids must be unique (a line without ``id`` is numbered ``q<line>``); ``answers`` may be left out
    (the question is scored on retrieval only).
    """

    doc_id_field = "file path below docs_dir"
    qid_field = "id"
    own_files = True
    answers_optional = True

    def __init__(
        self,
        *,
        docs_dir: str = ".",
        corpus_file: str | None = None,
        qa_file: str = "qa.jsonl",
        qa_format: str = "auto",
        text_encoding: str = "utf-8",
        missing_documents: str = "error",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for key, value, valid in (("qa_format", qa_format, QA_FORMATS), ("text_encoding", text_encoding, TEXT_ENCODINGS),
                                  ("missing_documents", missing_documents, MISSING_DOCUMENTS)):
            if value not in valid:
                raise ConfigError(f"dataset.{key}={value!r} is not valid; choose one of {list(valid)}")
        self.docs_dir = docs_dir
        self.corpus_file = corpus_file or None
        self.qa_file = qa_file
        self.qa_format = qa_format
        self.text_encoding = text_encoding
        self.missing_documents = missing_documents
        if self.corpus_file:
            self.doc_id_field = "id"

    def root(self) -> Path:
        if not self.path:
            raise DatasetError(
                "the custom dataset needs dataset.path", dataset=self.name,
                fix="run with dataset=custom dataset.path=/folder/with/documents dataset.qa_file=qa.jsonl",
            )
        return super().root()

    def read_spec(self) -> dict[str, Any]:
        return {"docs_dir": self.docs_dir, "qa_file": self.qa_file, "qa_format": self.qa_format,
                "text_encoding": self.text_encoding, "missing_documents": self.missing_documents,
                "reading": READING, **({"corpus_file": self.corpus_file} if self.corpus_file else {})}

    def load(self) -> EvalSet:
        """The evaluation set; ``evidence_level`` is ``document`` when every evidence item names a document."""
        evalset = super().load()
        items = [ev for q in evalset.queries for ev in q.evidence]
        self.evidence_level = "document" if items and all(names_document(ev) for ev in items) else "passage"
        return evalset

    def _documents(self, reader: FileReader, stats: dict[str, int]) -> tuple[list[Document], set[str]]:
        if self.corpus_file:
            lines = corpus_documents(reader, self.corpus_file, dataset=self.name, stats=stats)
            if not lines:
                raise DatasetError("the corpus file holds no document with text", dataset=self.name,
                                   file=str(reader.root / self.corpus_file),
                                   fix='write one {"id": ..., "title": ..., "text": ...} object per line')
            return lines, set()
        base = reader.root / self.docs_dir
        if not base.is_dir():
            raise DatasetError("the documents folder does not exist", dataset=self.name, file=str(base),
                               fix="set dataset.docs_dir to the folder (relative to dataset.path) holding the documents")
        files = sorted(p for p in base.rglob("*") if p.is_file() and p.suffix.lower() in DOC_SUFFIXES
                       and not any(part.startswith(".") for part in p.relative_to(base).parts))
        docs: list[Document] = []
        unreadable: set[str] = set()
        for p in files:
            doc_id = p.relative_to(base).as_posix()
            rel = p.relative_to(reader.root).as_posix()
            if p.suffix.lower() == ".pdf":
                try:
                    pages = reader.pdf_pages(rel)
                except UnreadableDocument as exc:
                    stats["pdf_unreadable"] += 1
                    unreadable.add(doc_id)
                    log.warning("custom: skipping unreadable PDF %s (%s)", p, exc)
                    continue
                sections = tuple(Section(title=f"Page {i}", paragraphs=(Paragraph(text=t, ref=str(i)),), ref=str(i))
                                 for i, t in enumerate(pages, start=1) if t)
                if not sections:
                    stats["pdf_unreadable"] += 1
                    unreadable.add(doc_id)
                    log.warning("custom: %s has no extractable text; skipped", p)
                    continue
                docs.append(Document(doc_id=doc_id, title=p.stem, sections=sections, meta={"file": rel}))
                continue
            data = reader.read_document(rel)
            try:
                text, _ = decode_text(data, encoding=self.text_encoding)
            except UnicodeDecodeError as exc:
                line = data[: exc.start].count(b"\n") + 1
                raise DatasetError(
                    f"invalid {self.text_encoding} at byte {exc.start} (line {line})", dataset=self.name,
                    file=str(p), fix="re-save the file as UTF-8, or set dataset.text_encoding=auto",
                ) from exc
            doc = text_document(doc_id, p.stem, p.suffix.lower(), text, rel) if text.strip() else None
            if doc is None:
                stats["documents_empty"] += 1
                continue
            docs.append(doc)
        if not docs:
            raise DatasetError(
                f"the corpus is empty: no readable {'/'.join(DOC_SUFFIXES)} file below the folder",
                dataset=self.name, file=str(base), fix="put the documents there or point dataset.docs_dir at them",
            )
        return docs, unreadable

    def _qa_path(self, reader: FileReader) -> str:
        """``qa_file`` as read: a relative path below ``dataset.path`` (not ``docs_dir``, not the current
        folder), an absolute or ``~`` path as it is. A relative name found only in the current folder is
        refused naming the absolute path to give."""
        rel = str(Path(self.qa_file).expanduser())
        if not Path(rel).is_absolute() and not (reader.root / rel).exists() and Path(rel).is_file():
            raise DatasetError(
                "dataset.qa_file not found below dataset.path (a relative qa_file is read there, not in the "
                "current folder)", dataset=self.name, file=str(reader.root / rel),
                fix=f"give its absolute path: dataset.qa_file={Path(rel).resolve()}")
        return rel

    def _questions(self, reader: FileReader) -> tuple[str, list[RawQA]]:
        fmt = self.qa_format
        if fmt == "auto":
            fmt = "jsonl" if self.qa_file.lower().endswith(".jsonl") else "easyrag"
        qa_file = self._qa_path(reader)
        file = str(reader.root / qa_file)
        if fmt == "jsonl":
            return file, parse_jsonl(reader.read_jsonl(qa_file), dataset=self.name, file=file)
        data = reader.read_json(qa_file, top=object)
        if not isinstance(data, list | dict):
            raise DatasetError(
                f"top level is a JSON {type(data).__name__}, expected an array of samples (or an object with "
                "'samples')", dataset=self.name, file=file,
                fix="point dataset.qa_file at an EasyRAG evaluation set, or a .jsonl QA file",
            )
        return file, parse_easyrag(data, dataset=self.name, file=file)

    def _read(self, reader: FileReader) -> tuple[list[Document], list[Query], dict[str, int]]:
        stats = {"documents_empty": 0, "pdf_unreadable": 0, "evidence_items": 0, "evidence_doc_inferred": 0,
                 "evidence_quote_not_found": 0, "missing_documents_ignored": 0, "qa_skipped_unreadable_document": 0,
                 "qa_without_evidence": 0, "evidence_documents": 0, "evidence_not_found": 0,
                 "qa_evidence_not_found": 0}
        docs, unreadable = self._documents(reader, stats)
        file, raw = self._questions(reader)
        where_docs = reader.root / (self.corpus_file or self.docs_dir)
        self.id_files = {"document": str(where_docs), "question": file}
        corpus = CustomCorpus(docs, by_file=not self.corpus_file)

        def resolve(name: str, qa: RawQA, field: str) -> str | None:
            found = corpus.named(name)
            if found and len(found) == 1:
                return next(iter(found))
            if name in unreadable or Path(name).name in {Path(u).name for u in unreadable}:
                raise _Unreadable
            if self.missing_documents == "ignore" and not found:
                stats["missing_documents_ignored"] += 1
                return None
            problem = f"{name!r} is ambiguous: {sorted(found)}" if found else f"no document {name!r} in the corpus"
            how = (f"name a document by its id in {where_docs}" if self.corpus_file else
                   f"name a file below {where_docs} by its relative path")
            raise DatasetError(
                f"the question refers to a missing document: {problem}", dataset=self.name, file=file,
                record=qa.where, field=field,
                fix=f"{how}, or set dataset.missing_documents=ignore to keep the quotes without a document",
            )

        def item(raw_ev: RawEvidence, qa: RawQA) -> Evidence | None:
            whole = raw_ev.doc if raw_ev.doc and not raw_ev.text and not raw_ev.ref else None
            if whole is None and not raw_ev.doc and bool(raw_ev.text) != bool(raw_ev.ref):
                name = str(raw_ev.text or raw_ev.ref)  # a string or a bare ref that names a document is that document
                whole = name if corpus.names.get(name) else None
            if whole is not None:
                doc = resolve(whole, qa, raw_ev.doc_field)
                stats["evidence_documents"] += doc is not None
                return Evidence(ref=doc, doc_id=doc, relevance=raw_ev.relevance) if doc else None
            doc = resolve(raw_ev.doc, qa, raw_ev.doc_field) if raw_ev.doc else None
            return Evidence(ref=raw_ev.ref, text=raw_ev.text, doc_id=doc, relevance=raw_ev.relevance)

        queries: list[Query] = []
        unmatched: list[str] = []
        for qa in raw:
            try:
                doc_ids = [d for d in (resolve(x, qa, "doc_ids") for x in qa.docs) if d]
                evidence = [ev for ev in (item(r, qa) for r in qa.evidence) if ev is not None]
            except _Unreadable:
                stats["qa_skipped_unreadable_document"] += 1
                continue
            if not qa.evidence and doc_ids:  # doc_ids alone: those documents are the relevant ones
                evidence = [Evidence(ref=d, doc_id=d) for d in doc_ids]
                stats["evidence_documents"] += len(evidence)
            located = []
            for ev in evidence:
                if ev.doc_id is None and ev.text:
                    hits = corpus.containing(ev.text)
                    if len(hits) == 1:
                        stats["evidence_doc_inferred"] += 1
                        ev = Evidence(ref=ev.ref, text=ev.text, doc_id=hits[0], relevance=ev.relevance)
                    elif not hits:
                        stats["evidence_quote_not_found"] += 1
                located.append(ev)
                if ev.doc_id and ev.doc_id not in doc_ids:
                    doc_ids.append(ev.doc_id)
            found = [corpus.found(ev) for ev in located]
            stats["evidence_items"] += len(located)
            stats["evidence_not_found"] += found.count(False)
            if not located:
                stats["qa_without_evidence"] += 1
            elif not any(found):
                stats["qa_evidence_not_found"] += 1
                unmatched.append(f"{qa.where} {shown(located[0])}")
            # OpenViking's check_recall reads evidence strings in the contexts; a document id is in none of them
            whole = bool(located) and all(names_document(ev) for ev in located)
            queries.append(Query(qid=qa.qid, text=qa.question, answers=qa.answers, question_type=qa.question_type,
                                 answerable=qa.answerable, evidence=tuple(located), doc_ids=tuple(doc_ids),
                                 meta=dict(qa.meta), openviking=OpenVikingQA(kept=False) if whole else None,
                                 conversation=qa.conversation, turn=qa.turn, history=qa.history))
        check_matched(queries, stats, unmatched, dataset=self.name, file=file)
        return docs, queries, stats


class _Unreadable(Exception):
    """A question names a document that exists but could not be read (skipped and counted)."""
