"""FinanceBench open-source subset (patronus-ai/financebench): filings as page-sectioned documents."""

from __future__ import annotations

import logging
from typing import Any

from ragbench.datasets.base import BaseAdapter, FileReader, require
from ragbench.datasets.checks import unique_ids
from ragbench.datasets.filetext import UnreadableDocument
from ragbench.errors import ConfigError, DatasetError
from ragbench.types import Document, Evidence, OpenVikingQA, Paragraph, Query, Section

log = logging.getLogger(__name__)

QUESTIONS = "data/financebench_open_source.jsonl"
DOCUMENTS = "data/financebench_document_information.jsonl"
PDF_DIR = "pdfs"
CORPUS_MODES = ("auto", "pdfs", "pages_only")
PAGES_ONLY_WARNING = (
    "pages_only corpus: built from evidence_text_full_page, it holds only the gold evidence pages "
    "(no other pages of the filings), so retrieval scores are inflated; add pdfs/ for the real corpus"
)


# What names a filing (its link and type) or makes its title (company): two rows of one doc_name that
# differ here are two documents under one id (refused). Any other difference (the official file lists
# FOOTLOCKER_2023_annualreport twice, doc_period 2023 and 2022) is metadata no score reads: merged.
FILING_FIELDS = ("company", "doc_type", "doc_link")
META_FIELDS = ("company", "gics_sector", "doc_type", "doc_period", "doc_link")


def merge_document_rows(rows: list[dict[str, Any]], *, dataset: str,
                        file: str) -> tuple[dict[str, dict[str, Any]], int]:
    """Document metadata by ``doc_name`` and the number of rows merged into an earlier row of the same
    name. Rows that agree on ``FILING_FIELDS`` are one document (the first row's other values are kept,
    the merge is logged); rows that disagree there are a DatasetError naming both values."""
    info: dict[str, dict[str, Any]] = {}
    merged = 0
    for n, row in enumerate(rows, start=1):
        name = require(row, "doc_name", dataset=dataset, file=file, where=f"line {n}", types=(str,))
        meta = {k: row[k] for k in META_FIELDS if k in row}
        first = info.get(name)
        if first is None:
            info[name] = meta
            continue
        clash = [k for k in FILING_FIELDS if first.get(k) != meta.get(k)]
        if clash:
            k = clash[0]
            raise DatasetError(
                f"doc_name {name!r} is listed again on line {n} for a different filing ({k} {first.get(k)!r} "
                f"vs {meta.get(k)!r}); one id would stand for two documents",
                dataset=dataset, file=file, record=f"line {n}", field="doc_name",
                fix=f"give one of the two filings its own doc_name (and rename its PDF and questions), or delete "
                f"the wrong row; rows that differ only outside {list(FILING_FIELDS)} are merged",
            )
        merged += 1
        differ = {k: (first.get(k), meta.get(k)) for k in META_FIELDS if first.get(k) != meta.get(k)}
        log.info("financebench: doc_name %r is listed again on line %d of %s; merged into the first row "
                 "(differs only in %s; first row kept; counted in dataset/documents_merged)", name, n, file,
                 differ or "nothing")
    return info, merged


def page_ref(page: int) -> str:
    """Paragraph/Section ref of a page: FinanceBench's own zero-based ``evidence_page_num``."""
    return str(page)


def _page_section(page: int, text: str) -> Section:
    return Section(title=f"Page {page + 1}", paragraphs=(Paragraph(text=text, ref=page_ref(page)),),
                   ref=page_ref(page), meta={"page_index": page})


class FinanceBenchAdapter(BaseAdapter):
    """Questions from ``financebench_open_source.jsonl``; the corpus is the filings they reference.

    ``corpus=pdfs`` reads ``pdfs/<doc_name>.pdf`` with pypdf, one section per page (ref = zero-based
    page index, as ``evidence_page_num``); ``pages_only`` builds each filing from the distinct
    ``evidence_text_full_page`` of its questions (tagged: it inflates retrieval scores); ``auto``
    picks ``pdfs`` when the folder exists. Unreadable or missing PDFs are skipped and counted, and
    their questions with them. A ``doc_name`` may only name a PDF below ``dataset.path``.
    """

    doc_id_field = "doc_name"
    qid_field = "financebench_id"
    default_scope = "document"  # the paper's per-filing store (it also reports a shared one)
    # each question is about one filing (its evidence pages lie in it): relevance per filing, retrieval/doc/*,
    # logged under retrieval.scope=corpus (the paper's shared vector store; the default per-filing store searches
    # the right filing by construction)
    evidence_level = "document"

    def __init__(self, *, corpus: str = "auto", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if corpus not in CORPUS_MODES:
            raise ConfigError(f"dataset.corpus={corpus!r} is not valid; choose one of {list(CORPUS_MODES)}")
        self.corpus = corpus
        self._resolved: str | None = None

    def read_spec(self) -> dict[str, Any]:
        return {"corpus": self._resolved or self.corpus}

    def extra_tags(self) -> dict[str, str]:
        mode = self._resolved or self.corpus
        tags = {"corpus": mode}
        if mode == "pages_only":
            tags["corpus_warning"] = PAGES_ONLY_WARNING
        return tags

    def _mode(self, reader: FileReader) -> str:
        has_pdfs = (reader.root / PDF_DIR).is_dir()
        if self.corpus == "pdfs" and not has_pdfs:
            raise DatasetError(
                "corpus=pdfs but the pdfs/ folder does not exist", dataset=self.name,
                file=str(reader.root / PDF_DIR),
                fix="put the filings at pdfs/<doc_name>.pdf (`python -m ragbench.datasets download "
                "financebench --pdfs`), or set dataset.corpus=pages_only",
            )
        if self.corpus == "auto":
            return "pdfs" if has_pdfs else "pages_only"
        return self.corpus

    def _pdf_document(self, reader: FileReader, name: str, meta: dict[str, Any],
                      stats: dict[str, int]) -> Document | None:
        rel = reader.referenced(f"{PDF_DIR}/{name}.pdf", file=str(reader.root / DOCUMENTS),
                                record=f"doc_name {name!r}", field="doc_name")
        if not (reader.root / rel).is_file():
            stats["pdf_missing"] += 1
            log.warning("financebench: %s is missing; its questions are skipped (counted)", reader.root / rel)
            return None
        try:
            pages = reader.pdf_pages(rel)
        except UnreadableDocument as exc:
            stats["pdf_unreadable"] += 1
            log.warning("financebench: skipping unreadable PDF %s (%s)", reader.root / rel, exc)
            return None
        stats["pdf_pages"] += len(pages)
        stats["pdf_pages_empty"] += sum(1 for p in pages if not p)
        sections = tuple(_page_section(i, text) for i, text in enumerate(pages) if text)
        if not sections:
            stats["pdf_unreadable"] += 1
            log.warning("financebench: %s has no extractable text; skipped", reader.root / rel)
            return None
        return Document(doc_id=name, title=f"{meta.get('company', name)} {name}", sections=sections,
                        meta={**meta, "pages": len(pages)})

    def _read(self, reader: FileReader) -> tuple[list[Document], list[Query], dict[str, int]]:
        mode = self._resolved = self._mode(reader)
        qfile, dfile = str(reader.root / QUESTIONS), str(reader.root / DOCUMENTS)
        stats = {"questions": 0, "evidence_items": 0, "qa_without_evidence": 0, "pdf_pages": 0,
                 "pdf_pages_empty": 0, "pdf_missing": 0, "pdf_unreadable": 0, "qa_skipped_no_document": 0,
                 "evidence_page_out_of_range": 0, "pages_conflicting_text": 0, "documents_merged": 0,
                 "evidence_without_text": 0}
        self.id_files = {"document": dfile, "question": qfile}
        info, stats["documents_merged"] = merge_document_rows(reader.read_jsonl(DOCUMENTS), dataset=self.name,
                                                              file=dfile)
        if stats["documents_merged"]:
            log.warning("financebench: %d repeated doc_name rows of %s merged (they name the same filing; "
                        "dataset/documents_merged)", stats["documents_merged"], dfile)
        rows = reader.read_jsonl(QUESTIONS)
        for n, row in enumerate(rows, start=1):
            require(row, "financebench_id", dataset=self.name, file=qfile, where=f"line {n}", types=(str,))
        unique_ids("question", [r["financebench_id"] for r in rows], dataset=self.name, file=qfile,
                   field="financebench_id",
                   fix=f"give each question its own id in {QUESTIONS}: two questions with one id would share "
                   "one score (the official release repeats none; restore the file if it was edited)")
        pages: dict[str, dict[int, str]] = {}
        parsed = []
        for n, row in enumerate(rows, start=1):
            qid = require(row, "financebench_id", dataset=self.name, file=qfile, where=f"line {n}", types=(str,))
            where = f"line {n} ({qid})"
            for key in ("doc_name", "question_type", "question"):
                require(row, key, dataset=self.name, file=qfile, where=where, types=(str,))
            require(row, "answer", dataset=self.name, file=qfile, where=where, types=(str, int, float))
            evidence = require(row, "evidence", dataset=self.name, file=qfile, where=where, types=(list,))
            doc = row["doc_name"]
            if doc not in info:
                raise DatasetError(
                    f"the question refers to document {doc!r}, which {DOCUMENTS} does not list",
                    dataset=self.name, file=qfile, record=where, field="doc_name",
                    fix=f"use the {DOCUMENTS} that came with this question file (same release)",
                )
            for ei, ev in enumerate(evidence):
                ewhere = f"{where} evidence[{ei}]"
                require(ev, "evidence_text", dataset=self.name, file=qfile, where=ewhere, types=(str,))
                page = require(ev, "evidence_page_num", dataset=self.name, file=qfile, where=ewhere, types=(int,))
                if isinstance(page, bool) or page < 0:
                    raise DatasetError(
                        f"evidence_page_num must be a page index >= 0, found {page!r}", dataset=self.name,
                        file=qfile, record=ewhere, field="evidence_page_num",
                        fix="use FinanceBench's zero-based page index of the filing",
                    )
                if mode == "pages_only":
                    full = require(ev, "evidence_text_full_page", dataset=self.name, file=qfile, where=ewhere,
                                   types=(str,))
                    ev_doc = str(ev.get("doc_name") or doc)
                    known = pages.setdefault(ev_doc, {})
                    if page in known and known[page] != full:
                        stats["pages_conflicting_text"] += 1
                    known.setdefault(page, full)
            parsed.append((row, where))

        docs: dict[str, Document | None] = {}
        for row, _ in parsed:
            name = row["doc_name"]
            if name in docs:
                continue
            if mode == "pdfs":
                docs[name] = self._pdf_document(reader, name, info[name], stats)
            else:
                sections = tuple(_page_section(p, t) for p, t in sorted(pages.get(name, {}).items()))
                docs[name] = Document(doc_id=name, title=f"{info[name].get('company', name)} {name}",
                                      sections=sections, meta={**info[name], "corpus": "pages_only"}) if sections else None

        queries: list[Query] = []
        for row, _ in parsed:
            stats["questions"] += 1
            doc = docs.get(row["doc_name"])
            if doc is None:
                stats["qa_skipped_no_document"] += 1
                continue
            n_pages = doc.meta.get("pages")
            evidence = []
            # OpenViking's FinanceBenchAdapter: every non-empty evidence_text, in order, as is
            ov = tuple(ev["evidence_text"] for ev in row["evidence"] if ev["evidence_text"])
            stats["evidence_without_text"] += len(row["evidence"]) - len(ov)
            for ev in row["evidence"]:
                page = ev["evidence_page_num"]
                if isinstance(n_pages, int) and not 0 <= page < n_pages:
                    stats["evidence_page_out_of_range"] += 1
                evidence.append(Evidence(ref=page_ref(page), text=ev["evidence_text"],
                                         doc_id=str(ev.get("doc_name") or row["doc_name"])))
            stats["evidence_items"] += len(evidence)
            if not evidence:
                stats["qa_without_evidence"] += 1
            queries.append(Query(
                qid=row["financebench_id"],
                text=row["question"],
                answers=(str(row["answer"]),),
                question_type=row["question_type"],
                answerable=True,
                evidence=tuple(evidence),
                doc_ids=(row["doc_name"],),
                meta={"company": row.get("company"), "question_reasoning": row.get("question_reasoning"),
                      "justification": row.get("justification")},
                openviking=OpenVikingQA(evidence=ov),
            ))
        if stats["qa_skipped_no_document"]:
            log.warning("financebench: %d questions skipped because their filing is missing or unreadable",
                        stats["qa_skipped_no_document"])
        return [d for d in docs.values() if d is not None], queries, stats
