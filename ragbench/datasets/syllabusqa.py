"""SyllabusQA (umass-ml4ed/SyllabusQA): one document per syllabus, QA rows from the split files."""

from __future__ import annotations

import logging
from typing import Any

from ragbench.datasets.base import BaseAdapter, FileReader, require
from ragbench.datasets.filetext import (
    TEXT_ENCODINGS,
    UnreadableDocument,
    decode_text,
    paragraphs_of_text,
)
from ragbench.errors import ConfigError, DatasetError
from ragbench.text import norm_key
from ragbench.types import Document, Evidence, OpenVikingQA, Query

log = logging.getLogger(__name__)

SPLITS = ("train", "val", "test", "all")
SPLIT_FORMATS = ("csv", "json")
SYLLABUS_FORMATS = ("text", "word")
SPLIT_DIR = "data/dataset_split"
SYLLABUS_PATHS = {"text": "syllabi/syllabi_redacted/text/{name}.txt",
                  "word": "syllabi/syllabi_redacted/word/{name}.docx"}
N_SLOTS = 5
REQUIRED = ("id", "syllabus_name", "question_type", "question", "answer")
COLUMNS = REQUIRED + tuple(f"answer_span_{i}" for i in range(1, N_SLOTS + 1)) + tuple(
    f"reasoning_step_{i}" for i in range(1, N_SLOTS + 1))
NO_ANSWER = "no answer"

# The seven published types, as metric-key-safe names ("yes/no" would split an MLflow key path).
QUESTION_TYPES = {
    "single factual": "single_factual",
    "multi factual": "multi_factual",
    "single reasoning": "single_reasoning",
    "multi reasoning": "multi_reasoning",
    "summarization": "summarization",
    "yes/no": "yes_no",
    "no answer": "no_answer",
}


def type_name(raw: str) -> str:
    """Metric-safe name of a published question type (unknown types are slugified, not dropped)."""
    key = raw.strip().lower()
    return QUESTION_TYPES.get(key) or norm_key(key) or "unknown"


def openviking_evidence(spans: list[str], steps: list[str]) -> tuple[str, ...]:
    """OpenViking's SyllabusQAAdapter list: every span stripped (repeats kept), then every step stripped
    unless already in the list."""
    out = [s.strip() for s in spans]
    for step in (s.strip() for s in steps):
        if step not in out:
            out.append(step)
    return tuple(out)


class SyllabusQAAdapter(BaseAdapter):
    """Reads ``data/dataset_split/<split>.{csv,json}`` and the syllabi those rows name (.txt or .docx).

    Only the syllabi of the chosen split are read, so the corpus is the split's syllabi. Evidence is
    every answer span (verbatim quotes) and every reasoning step (annotator paraphrases), as text.
    A ``syllabus_name`` may only name a file below ``dataset.path``. A question id seen before (within a
    split or, with ``split=all``, across splits) is kept as ``<id>#<split><row>`` and counted in
    ``dataset/qa_duplicate_id``, so no question overwrites another.

    Spans and steps are kept verbatim, surrounding whitespace too (many end in a newline: counted in
    ``dataset/evidence_untrimmed``). The list ``context/openviking_recall`` reads is OpenViking's
    (``Query.openviking``): spans stripped, then steps stripped and added when not already there; it
    skips questions of type exactly ``no answer``.
    """

    doc_id_field = "syllabus_name"
    qid_field = "id"
    default_scope = "document"  # a question is asked of its own syllabus

    def __init__(
        self,
        *,
        split: str = "test",
        split_format: str = "csv",
        syllabus_format: str = "text",
        text_encoding: str = "auto",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for key, value, valid in (("split", split, SPLITS), ("split_format", split_format, SPLIT_FORMATS),
                                  ("syllabus_format", syllabus_format, SYLLABUS_FORMATS),
                                  ("text_encoding", text_encoding, TEXT_ENCODINGS)):
            if value not in valid:
                raise ConfigError(f"dataset.{key}={value!r} is not valid; choose one of {list(valid)}")
        self.split = split
        self.split_format = split_format
        self.syllabus_format = syllabus_format
        self.text_encoding = text_encoding

    def read_spec(self) -> dict[str, Any]:
        return {"split": self.split, "split_format": self.split_format,
                "syllabus_format": self.syllabus_format, "text_encoding": self.text_encoding}

    def _rows(self, reader: FileReader, split: str) -> tuple[str, list[dict[str, Any]]]:
        rel = f"{SPLIT_DIR}/{split}.{self.split_format}"
        file = str(reader.root / rel)
        if self.split_format == "json":
            rows = reader.read_json(rel, top=list)
            for n, row in enumerate(rows):
                for key in REQUIRED:
                    require(row, key, dataset=self.name, file=file, where=f"#{n}", types=(str,))
            return rel, rows
        rows = list[dict[Any, Any]](reader.read_csv(rel))  # an overlong row has a None key
        header = list(rows[0].keys()) if rows else []
        for key in REQUIRED:
            if rows and key not in header:
                raise DatasetError(
                    "required CSV column is missing", dataset=self.name, file=file, field=key,
                    fix=f"the official header is: {','.join(COLUMNS)}",
                )
        for n, row in enumerate(rows):
            if None in row or any(v is None for v in row.values()):
                raise DatasetError(
                    f"invalid CSV: row has {len(header) + len(row.get(None) or [])} fields where the "
                    f"header has {len(header)}", dataset=self.name, file=file,
                    record=f"row {n + 1} (id {row.get('id')!r})", fix="re-download the file",
                )
        # CSV leaves empty cells as "" where the JSON encoding has null: make them the same.
        return rel, [{k: (v if v != "" else None) for k, v in row.items()} for row in rows]

    def _syllabus(self, reader: FileReader, rel: str, name: str, stats: dict[str, int]) -> Document | None:
        stats["syllabi_read"] += 1
        if self.syllabus_format == "word":
            try:
                text = reader.docx_text(rel)
            except UnreadableDocument as exc:
                stats["syllabi_unreadable"] += 1
                log.warning("syllabusqa: skipping unreadable syllabus %s (%s)", reader.root / rel, exc)
                return None
            encoding = "docx"
        else:
            data = reader.read_document(rel)
            try:
                raw, encoding = decode_text(data, encoding=self.text_encoding)
            except UnicodeDecodeError as exc:
                raise DatasetError(
                    f"cannot decode as {self.text_encoding} at byte {exc.start}", dataset=self.name,
                    file=str(reader.root / rel), fix="set dataset.text_encoding=auto (UTF-8, else Mac OS Roman)",
                ) from exc
            if encoding == "mac_roman":
                stats["syllabi_mac_roman"] += 1
            text = "\n\n".join(paragraphs_of_text(raw))
        return Document(doc_id=name, title=name, text=text, meta={"file": rel, "encoding": encoding})

    def _read(self, reader: FileReader) -> tuple[list[Document], list[Query], dict[str, int]]:
        stats = {"qa_rows": 0, "evidence_answer_spans": 0, "evidence_reasoning_steps": 0,
                 "qa_without_evidence": 0, "qa_unknown_type": 0, "qa_duplicate_id": 0, "syllabi_read": 0,
                 "syllabi_mac_roman": 0, "syllabi_unreadable": 0, "qa_skipped_unreadable_syllabus": 0,
                 "evidence_untrimmed": 0}
        docs: dict[str, Document | None] = {}
        queries: list[Query] = []
        seen: set[str] = set()
        for split in (("train", "val", "test") if self.split == "all" else (self.split,)):
            rel, rows = self._rows(reader, split)
            file = str(reader.root / rel)
            for n, row in enumerate(rows):
                stats["qa_rows"] += 1
                qid, name = str(row["id"]), str(row["syllabus_name"])
                if name not in docs:
                    syllabus_rel = reader.referenced(
                        SYLLABUS_PATHS[self.syllabus_format].format(name=name), file=file,
                        record=f"#{n} (id {qid})", field="syllabus_name")
                    if not (reader.root / syllabus_rel).is_file():
                        raise DatasetError(
                            f"the question refers to syllabus {name!r}, but {syllabus_rel} does not exist",
                            dataset=self.name, file=file, record=f"#{n} (id {qid})", field="syllabus_name",
                            fix=f"place the syllabus at {reader.root / syllabus_rel} (official layout), "
                            "or use the syllabi folder that came with these split files",
                        )
                    docs[name] = self._syllabus(reader, syllabus_rel, name, stats)
                if docs[name] is None:
                    stats["qa_skipped_unreadable_syllabus"] += 1
                    continue
                raw_type = str(row["question_type"])
                if raw_type.strip().lower() not in QUESTION_TYPES:
                    stats["qa_unknown_type"] += 1
                spans = [str(row[k]) for k in (f"answer_span_{i}" for i in range(1, N_SLOTS + 1))
                         if row.get(k) and str(row[k]).strip()]
                steps = [str(row[k]) for k in (f"reasoning_step_{i}" for i in range(1, N_SLOTS + 1))
                         if row.get(k) and str(row[k]).strip()]
                stats["evidence_untrimmed"] += sum(t != t.strip() for t in spans + steps)
                stats["evidence_answer_spans"] += len(spans)
                stats["evidence_reasoning_steps"] += len(steps)
                if not spans and not steps:
                    stats["qa_without_evidence"] += 1
                if qid in seen:  # de-duplicated, counted and logged (see the class docstring)
                    stats["qa_duplicate_id"] += 1
                    qid = f"{qid}#{split}{n}"
                seen.add(qid)
                queries.append(Query(
                    qid=qid,
                    text=str(row["question"] or "").strip(),  # an empty cell is None: never the text "None"
                    answers=(str(row["answer"] or ""),),
                    question_type=type_name(raw_type),
                    answerable=raw_type.strip().lower() != NO_ANSWER,
                    evidence=tuple(Evidence(text=t, doc_id=name) for t in spans + steps),
                    doc_ids=(name,),
                    meta={"split": split, "question_type_raw": raw_type,
                          "evidence_kinds": ",".join(["answer_span"] * len(spans) + ["reasoning_step"] * len(steps))},
                    openviking=OpenVikingQA(evidence=openviking_evidence(spans, steps),
                                            kept=raw_type != NO_ANSWER),
                ))
        if stats["qa_duplicate_id"]:
            log.warning("syllabusqa: %d questions repeat an earlier id; renamed <id>#<split><row> and counted "
                        "(dataset/qa_duplicate_id)", stats["qa_duplicate_id"])
        if stats["syllabi_unreadable"]:
            log.warning("syllabusqa: %d unreadable syllabi skipped with %d questions (counted in stats)",
                        stats["syllabi_unreadable"], stats["qa_skipped_unreadable_syllabus"])
        return [d for d in docs.values() if d is not None], queries, stats
