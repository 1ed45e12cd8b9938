"""Qasper v0.3 (``qasper-{split}-v0.3.json``): paper > section > paragraph, one gold answer per annotation."""

from __future__ import annotations

import logging
from typing import Any

from ragbench.datasets.base import BaseAdapter, FileReader, require
from ragbench.errors import ConfigError, DatasetError
from ragbench.types import Document, Evidence, OpenVikingQA, Paragraph, Query, Section

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
UNANSWERABLE = "Unanswerable"
FLOAT_PREFIX = "FLOAT SELECTED: "


def answer_of(annotation: dict[str, Any]) -> tuple[str, str]:
    """(answer type, gold text) of one annotation, as the official Qasper evaluator defines them."""
    if annotation.get("unanswerable"):
        return "unanswerable", UNANSWERABLE
    spans = annotation.get("extractive_spans") or []
    if spans:
        return "extractive", ", ".join(str(s) for s in spans)
    if annotation.get("free_form_answer"):
        return "abstractive", str(annotation["free_form_answer"])
    if annotation.get("yes_no") is not None:
        return "boolean", "Yes" if annotation["yes_no"] else "No"
    return "unanswerable", UNANSWERABLE


class QasperAdapter(BaseAdapter):
    """Reads one split; question type = answer type of the first annotation (extractive,
    abstractive, boolean, unanswerable); evidence = the annotated paragraphs (figure captions too).
    Paper ids repeated in the file are refused when it is read (repeated JSON keys).

    Evidence marked ``FLOAT SELECTED: `` (a figure or table caption) loses the marker, so it can be
    found in the caption text (counted in ``dataset/evidence_float_selected``); OpenViking's
    QasperAdapter keeps it, and so does the list ``context/openviking_recall`` reads (``Query.openviking``).
    """

    doc_id_field = "paper id"
    qid_field = "question_id"
    default_scope = "document"  # a question is asked of its own paper

    def __init__(self, *, split: str = "train", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if split not in SPLITS:
            raise ConfigError(f"dataset.split={split!r} is not valid; choose one of {list(SPLITS)}")
        self.split = split

    def read_spec(self) -> dict[str, Any]:
        return {"split": self.split}

    def _read(self, reader: FileReader) -> tuple[list[Document], list[Query], dict[str, int]]:
        rel = f"qasper-{self.split}-v0.3.json"
        data = reader.read_json(rel, top=dict)
        file = str(reader.root / rel)
        docs: list[Document] = []
        queries: list[Query] = []
        self.id_files = {"document": file, "question": file}
        stats = {"annotations": 0, "evidence_paragraphs": 0, "qa_without_evidence": 0,
                 "qa_dropped_no_annotation": 0, "evidence_float_selected": 0}
        for pid, paper in data.items():
            where = f"paper {pid}"
            title = str(require(paper, "title", dataset=self.name, file=file, where=where, types=(str,)))
            full_text = require(paper, "full_text", dataset=self.name, file=file, where=where, types=(list,))
            sections = []
            abstract = paper.get("abstract")
            if abstract:
                sections.append(Section(title="Abstract", paragraphs=(Paragraph(text=str(abstract)),)))
            for si, sec in enumerate(full_text):
                paras = require(sec, "paragraphs", dataset=self.name, file=file,
                                where=f"{where} full_text[{si}]", types=(list,))
                name = str(sec.get("section_name") or f"Section {si + 1}")
                for pi, p in enumerate(paras):
                    if not isinstance(p, str):  # str(None) would index the word "None"
                        raise DatasetError(
                            f"expected a paragraph string, found {type(p).__name__}", dataset=self.name,
                            file=file, record=f"{where} full_text[{si}].paragraphs[{pi}]", field="paragraphs",
                            fix="point dataset.path at the official, unmodified file",
                        )
                paragraphs = tuple(Paragraph(text=p) for p in paras if p.strip())
                if paragraphs:
                    sections.append(Section(title=name, paragraphs=paragraphs))
            floats = [f for f in paper.get("figures_and_tables") or [] if isinstance(f, dict) and f.get("caption")]
            if floats:
                sections.append(Section(
                    title="Figures and tables",
                    paragraphs=tuple(Paragraph(text=str(f["caption"]), ref=str(f.get("file"))) for f in floats),
                ))
            docs.append(Document(doc_id=pid, title=title, sections=tuple(sections)))

            qas = require(paper, "qas", dataset=self.name, file=file, where=where, types=(list,))
            for qi, qa in enumerate(qas):
                qwhere = f"{where} qas[{qi}]"
                question = require(qa, "question", dataset=self.name, file=file, where=qwhere, types=(str,))
                annotations = require(qa, "answers", dataset=self.name, file=file, where=qwhere, types=(list,))
                types, golds, evidence, ov_evidence = [], [], [], []
                for ai, ann in enumerate(annotations):
                    body = require(ann, "answer", dataset=self.name, file=file,
                                   where=f"{qwhere} answers[{ai}]", types=(dict,))
                    kind, gold = answer_of(body)
                    types.append(kind)
                    golds.append(gold)
                    raw = body.get("evidence") or []
                    if not isinstance(raw, list):
                        require(body, "evidence", dataset=self.name, file=file, where=f"{qwhere} answers[{ai}]",
                                types=(list,))
                    for ev in raw:
                        if not isinstance(ev, str):
                            raise DatasetError(
                                f"expected an evidence string, found {type(ev).__name__}", dataset=self.name,
                                file=file, record=f"{qwhere} answers[{ai}]", field="evidence",
                                fix="point dataset.path at the official, unmodified file",
                            )
                        if ev.strip() and ev not in ov_evidence:  # OpenViking: raw, de-duplicated
                            ov_evidence.append(ev)
                        text = ev.removeprefix(FLOAT_PREFIX)
                        stats["evidence_float_selected"] += text != ev
                        if text.strip() and text not in evidence:
                            evidence.append(text)
                stats["annotations"] += len(annotations)
                stats["evidence_paragraphs"] += len(evidence)
                if not annotations:  # nothing to score against: dropped, counted and logged
                    stats["qa_dropped_no_annotation"] += 1
                    continue
                if not evidence:
                    stats["qa_without_evidence"] += 1
                queries.append(Query(
                    qid=str(qa.get("question_id") or f"{pid}/q{qi}"),
                    text=question,
                    answers=tuple(dict.fromkeys(golds)),
                    question_type=types[0],
                    answerable=any(t != "unanswerable" for t in types),
                    evidence=tuple(Evidence(text=e, doc_id=pid) for e in evidence),
                    doc_ids=(pid,),
                    meta={"answer_types": ",".join(types)},
                    # OpenViking skips a question whose every annotation is unanswerable
                    openviking=OpenVikingQA(evidence=tuple(ov_evidence), kept=not all(
                        a["answer"].get("unanswerable", False) for a in annotations)),
                ))
        if stats["evidence_float_selected"]:
            log.info("qasper: %d evidence items lose their %r marker (dataset/evidence_float_selected); "
                     "context/openviking_recall keeps it, as OpenViking does", stats["evidence_float_selected"],
                     FLOAT_PREFIX)
        if stats["qa_dropped_no_annotation"]:
            log.warning("qasper: %d questions without annotations dropped (dataset/qa_dropped_no_annotation)",
                        stats["qa_dropped_no_annotation"])
        return docs, queries, stats
