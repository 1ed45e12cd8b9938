"""The user's own corpus: a folder of .txt/.md/.pdf files plus a QA file (JSONL or EasyRAG JSON)."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from ragbench.datasets.base import BaseAdapter, FileReader
from ragbench.datasets.customqa import RawQA, parse_easyrag, parse_jsonl
from ragbench.datasets.filetext import TEXT_ENCODINGS, UnreadableDocument, decode_text
from ragbench.errors import ConfigError, DatasetError
from ragbench.text import loose_normalize
from ragbench.types import Document, Evidence, Paragraph, Query, Section

log = logging.getLogger(__name__)

DOC_SUFFIXES = (".txt", ".md", ".pdf")
QA_FORMATS = ("auto", "jsonl", "easyrag")
MISSING_DOCUMENTS = ("error", "ignore")


_MD_HEAD = re.compile(r"^#\s+", flags=re.MULTILINE)


def _md_title(text: str) -> str | None:
    r"""Title of the first ``# heading``: what r"^#\s+(.+?)\s*#*\s*$" (MULTILINE) captures, in linear time
    (that pattern backtracks cubically over a long run of spaces)."""
    m = _MD_HEAD.search(text)
    if not m:
        return None
    pos = m.end()
    if pos < len(text):  # the greedy \s+ stopped at a non-space: the title is the rest of that line
        end = text.find("\n", pos)
        line = text[pos:] if end < 0 else text[pos:end]
        return line[: max(1, len(line.rstrip().rstrip("#").rstrip()))]
    tail = text[m.start() + 1:]  # "#" and only whitespace to the end: the last non-newline character
    return next((tail[j] for j in range(len(tail) - 1, 0, -1) if tail[j] != "\n"), None)


class CustomAdapter(BaseAdapter):
    """Documents: every .txt/.md/.pdf below ``path/docs_dir`` (doc_id = path relative to it; PDFs as one
    section per page, ref = 1-based page number). Questions: ``qa_file`` (relative to ``path``).

    Document names in the QA file may be the relative path, the file name or the stem. Quotes without
    a document are located in the corpus (exact normalised text) to fill the question's doc_ids.
    Question ids must be unique (a line without ``id`` is numbered ``q<line>``).
    """

    doc_id_field = "file path below docs_dir"
    qid_field = "id"

    def __init__(
        self,
        *,
        docs_dir: str = ".",
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
        self.qa_file = qa_file
        self.qa_format = qa_format
        self.text_encoding = text_encoding
        self.missing_documents = missing_documents

    def root(self) -> Path:
        if not self.path:
            raise DatasetError(
                "the custom dataset needs dataset.path", dataset=self.name,
                fix="run with dataset=custom dataset.path=/folder/with/documents dataset.qa_file=qa.jsonl",
            )
        return super().root()

    def read_spec(self) -> dict[str, Any]:
        return {"docs_dir": self.docs_dir, "qa_file": self.qa_file, "qa_format": self.qa_format,
                "text_encoding": self.text_encoding, "missing_documents": self.missing_documents}

    def _documents(self, reader: FileReader, stats: dict[str, int]) -> tuple[list[Document], set[str]]:
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
            if not text.strip():
                stats["documents_empty"] += 1
                continue
            title = (_md_title(text) if p.suffix.lower() == ".md" else None) or p.stem
            docs.append(Document(doc_id=doc_id, title=title, text=text, meta={"file": rel}))
        if not docs:
            raise DatasetError(
                f"the corpus is empty: no readable {'/'.join(DOC_SUFFIXES)} file below the folder",
                dataset=self.name, file=str(base), fix="put the documents there or point dataset.docs_dir at them",
            )
        return docs, unreadable

    def _questions(self, reader: FileReader) -> tuple[str, list[RawQA]]:
        fmt = self.qa_format
        if fmt == "auto":
            fmt = "jsonl" if self.qa_file.lower().endswith(".jsonl") else "easyrag"
        file = str(reader.root / self.qa_file)
        if fmt == "jsonl":
            return file, parse_jsonl(reader.read_jsonl(self.qa_file), dataset=self.name, file=file)
        data = reader.read_json(self.qa_file, top=object)
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
                 "qa_without_evidence": 0}
        docs, unreadable = self._documents(reader, stats)
        file, raw = self._questions(reader)
        self.id_files = {"document": str(reader.root / self.docs_dir), "question": file}
        names: dict[str, set[str]] = {}
        for d in docs:
            for key in {d.doc_id, d.doc_id.rsplit("/", 1)[-1], Path(d.doc_id).stem}:
                names.setdefault(key, set()).add(d.doc_id)
        bodies = {d.doc_id: loose_normalize(d.text or " ".join(p.text for s in d.sections for p in s.paragraphs)) for d in docs}

        def resolve(name: str, qa: RawQA, field: str) -> str | None:
            found = names.get(name) or names.get(name.rsplit("/", 1)[-1] if "/" in name else name)
            if found and len(found) == 1:
                return next(iter(found))
            if name in unreadable or Path(name).name in {Path(u).name for u in unreadable}:
                raise _Unreadable
            if self.missing_documents == "ignore" and not found:
                stats["missing_documents_ignored"] += 1
                return None
            problem = f"{name!r} is ambiguous: {sorted(found)}" if found else f"no document {name!r} in the corpus"
            raise DatasetError(
                f"the question refers to a missing document: {problem}", dataset=self.name, file=file,
                record=qa.where, field=field,
                fix=f"name a file below {reader.root / self.docs_dir} by its relative path, or set "
                "dataset.missing_documents=ignore to keep the quotes without a document",
            )

        queries: list[Query] = []
        for qa in raw:
            try:
                doc_ids = [d for d in (resolve(x, qa, "doc_ids") for x in qa.docs) if d]
                evidence = []
                for raw_ev in qa.evidence:
                    doc = resolve(raw_ev.doc, qa, raw_ev.doc_field) if raw_ev.doc else None
                    evidence.append(Evidence(ref=raw_ev.ref, text=raw_ev.text, doc_id=doc, relevance=raw_ev.relevance))
            except _Unreadable:
                stats["qa_skipped_unreadable_document"] += 1
                continue
            located = []
            for ev in evidence:
                if ev.doc_id is None and ev.text:
                    hits = [d for d, body in bodies.items() if loose_normalize(ev.text) and loose_normalize(ev.text) in body]
                    if len(hits) == 1:
                        stats["evidence_doc_inferred"] += 1
                        ev = Evidence(ref=ev.ref, text=ev.text, doc_id=hits[0], relevance=ev.relevance)
                    elif not hits:
                        stats["evidence_quote_not_found"] += 1
                located.append(ev)
                if ev.doc_id and ev.doc_id not in doc_ids:
                    doc_ids.append(ev.doc_id)
            stats["evidence_items"] += len(located)
            if not located:
                stats["qa_without_evidence"] += 1
            queries.append(Query(qid=qa.qid, text=qa.question, answers=qa.answers, question_type=qa.question_type,
                                 answerable=qa.answerable, evidence=tuple(located), doc_ids=tuple(doc_ids),
                                 meta=dict(qa.meta)))
        if stats["evidence_quote_not_found"]:
            log.warning("custom: %d evidence quotes were not found verbatim in any document (counted)",
                        stats["evidence_quote_not_found"])
        return docs, queries, stats


class _Unreadable(Exception):
    """A question names a document that exists but could not be read (skipped and counted)."""
