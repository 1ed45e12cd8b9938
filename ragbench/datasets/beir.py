"""BEIR format (beir-cellar/beir): ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv`` as distributed.

Any dataset in that layout reads without conversion: the BEIR zips, MTEB's retrieval sets saved as BEIR
folders, a user's own export. Relevance is graded and per document, search is over the whole corpus.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ragbench.datasets.base import BaseAdapter, FileReader, require
from ragbench.errors import DatasetError
from ragbench.types import Document, Evidence, Paragraph, Query, Section

log = logging.getLogger(__name__)

CORPUS = "corpus.jsonl"
QUERIES = "queries.jsonl"
QRELS_DIR = "qrels"
QRELS_HEADER = ("query-id", "corpus-id", "score")
QUESTION_TYPE = "query"  # BEIR has no question types


def document_text(title: str, text: str) -> str:
    """What BEIR and MTEB feed a model for a document: ``title + " " + text``, stripped (the text alone
    when there is no title)."""
    return f"{title} {text}".strip() if title else text.strip()


def repeated_ids(lines: dict[str, list[int]], *, dataset: str, file: str) -> None:
    """A DatasetError naming the repeated query ids and their lines. BEIR's ``GenericDataLoader`` keeps a
    repeated ``_id``'s last line without a word (a dict assignment), so a merged file scores other
    questions than its author wrote; ragbench refuses it."""
    repeated = {qid: ns for qid, ns in lines.items() if len(ns) > 1}
    if not repeated:
        return
    shown = "; ".join(f"{qid!r} on lines {', '.join(map(str, ns))}" for qid, ns in list(repeated.items())[:3])
    more = f" and {len(repeated) - 3} more" if len(repeated) > 3 else ""
    raise DatasetError(
        f"{len(repeated)} query ids occur more than once: {shown}{more} (they would be merged into one "
        "question)", dataset=dataset, file=file, field="_id",
        fix=f"give every line of {QUERIES} its own _id (the official files repeat none: re-download it)",
    )


class BEIRAdapter(BaseAdapter):
    """Reads a BEIR folder: one document per corpus line (``_id``, ``title``, ``text``; the text indexed is
    ``document_text``), the queries that the ``split``'s qrels judge, their graded relevance per document.

    Protocol: corpus scope, document-level relevance (``evidence_level``): every question's evidence is the
    ids of its judged documents with their grades. ``ignore_identical_ids``: BEIR's rule that a retrieved
    document whose id equals the question's id is dropped before scoring (ArguAna, Quora); applied to the
    document-level metrics and counted (``retrieval/doc/self_hit_ignored``).
    """

    doc_id_field = "_id"
    qid_field = "_id"
    evidence_level = "document"
    has_answers = False

    def __init__(self, *, split: str = "test", ignore_identical_ids: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.split = split
        self.ignore_identical_ids = ignore_identical_ids

    def root(self) -> Path:
        if not self.path:
            raise DatasetError(
                "dataset.path is required: no BEIR dataset is bundled", dataset=self.name,
                fix="set dataset.path to a BEIR folder (corpus.jsonl, queries.jsonl, qrels/), or run "
                    "`python -m ragbench.datasets download beir/scifact` and use the folder it prints",
            )
        return super().root()

    def read_spec(self) -> dict[str, Any]:
        return {"split": self.split, "ignore_identical_ids": self.ignore_identical_ids}

    def _qrels(self, reader: FileReader) -> tuple[dict[str, dict[str, int]], str]:
        rel = f"{QRELS_DIR}/{self.split}.tsv"
        if not (reader.root / rel).is_file():
            have = sorted(p.stem for p in (reader.root / QRELS_DIR).glob("*.tsv"))
            raise DatasetError(
                f"no qrels for split {self.split!r}", dataset=self.name, file=str(reader.root / rel),
                fix=f"set dataset.split to one of {have}" if have else
                    f"place the BEIR qrels file at {reader.root / rel} (query-id, corpus-id, score; tab-separated)",
            )
        file = str(reader.root / rel)
        qrels: dict[str, dict[str, int]] = {}
        for n, line in enumerate(reader.read_text(rel).splitlines(), start=1):
            if not line.strip():
                continue
            cols = line.rstrip("\r").split("\t")
            if n == 1 and tuple(c.strip().lower() for c in cols) == QRELS_HEADER:
                continue
            if len(cols) != 3:
                raise DatasetError(
                    f"line {n} has {len(cols)} tab-separated columns, expected 3 (query-id, corpus-id, score)",
                    dataset=self.name, file=file, record=f"line {n}",
                    fix="write one judgement per line: query-id<TAB>corpus-id<TAB>integer score",
                )
            try:
                score = int(cols[2])
            except ValueError:
                raise DatasetError(
                    f"score {cols[2]!r} on line {n} is not an integer", dataset=self.name, file=file,
                    record=f"line {n}", field="score", fix="graded relevance must be an integer (0, 1, 2 ...)",
                ) from None
            qrels.setdefault(cols[0], {})[cols[1]] = score
        return qrels, file

    def _read(self, reader: FileReader) -> tuple[list[Document], list[Query], dict[str, int]]:
        cfile, qfile = str(reader.root / CORPUS), str(reader.root / QUERIES)
        stats = {"documents": 0, "documents_without_title": 0, "queries_in_file": 0, "queries_judged": 0,
                 "qrels": 0, "qrels_unknown_document": 0, "qrels_unknown_query": 0}
        self.id_files = {"document": cfile, "question": qfile}
        docs: list[Document] = []
        for n, row in enumerate(reader.read_jsonl(CORPUS), start=1):
            where = f"line {n}"
            doc_id = str(require(row, "_id", dataset=self.name, file=cfile, where=where, types=(str, int)))
            text = require(row, "text", dataset=self.name, file=cfile, where=where, types=(str,))
            title = row.get("title") or ""
            if not isinstance(title, str):
                raise DatasetError(f"expected str, found {type(title).__name__}", dataset=self.name, file=cfile,
                                   record=where, field="title", fix="give the title as a string (or \"\")")
            stats["documents"] += 1
            stats["documents_without_title"] += not title
            body = document_text(title, text)
            docs.append(Document(doc_id=doc_id, title=title or doc_id, sections=(
                Section(title=title or doc_id, paragraphs=(Paragraph(text=body, ref=doc_id),) if body else ()),)))
        qrels, qrels_file = self._qrels(reader)
        known = {d.doc_id for d in docs}
        texts: dict[str, str] = {}
        lines: dict[str, list[int]] = {}
        for n, row in enumerate(reader.read_jsonl(QUERIES), start=1):
            where = f"line {n}"
            qid = str(require(row, "_id", dataset=self.name, file=qfile, where=where, types=(str, int)))
            text = require(row, "text", dataset=self.name, file=qfile, where=where, types=(str,))
            texts.setdefault(qid, text)
            lines.setdefault(qid, []).append(n)
        repeated_ids(lines, dataset=self.name, file=qfile)
        stats["queries_in_file"] = len(texts)
        queries: list[Query] = []
        for qid, judged in qrels.items():  # BEIR keeps the queries its qrels judge, in qrels order
            stats["qrels"] += len(judged)
            if qid not in texts:
                stats["qrels_unknown_query"] += 1
                continue
            missing = [d for d in judged if d not in known]
            stats["qrels_unknown_document"] += len(missing)
            evidence = tuple(Evidence(ref=d, doc_id=d, relevance=g) for d, g in judged.items())
            queries.append(Query(qid=qid, text=texts[qid], answers=(), question_type=QUESTION_TYPE,
                                 evidence=evidence, meta={"ignore_identical_id": self.ignore_identical_ids}))
        stats["queries_judged"] = len(queries)
        if qrels and not queries:
            raise DatasetError(
                f"no query id of {QRELS_DIR}/{self.split}.tsv is in {QUERIES}", dataset=self.name, file=qrels_file,
                fix=f"use the {QUERIES} and qrels of the same BEIR dataset",
            )
        if stats["qrels_unknown_document"] or stats["qrels_unknown_query"]:
            log.warning("beir: %d judgements name a document not in %s, %d a query not in %s (counted)",
                        stats["qrels_unknown_document"], CORPUS, stats["qrels_unknown_query"], QUERIES)
        return docs, queries, stats
