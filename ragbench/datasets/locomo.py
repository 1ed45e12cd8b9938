"""LoCoMo (snap-research/locomo, ``data/locomo10.json``): conversations as documents, sessions as sections."""

from __future__ import annotations

import logging
import re
from typing import Any

from ragbench.datasets.base import BaseAdapter, FileReader, require
from ragbench.types import Document, Evidence, Paragraph, Query, Section

log = logging.getLogger(__name__)

FILE = "data/locomo10.json"

# Category table, version 1. The LoCoMo paper lists the types in a different order than the numbers
# in the released file; this mapping is the one derived from the data itself (and used by the Mem0
# and Zep evaluations): category 4 holds the single-session factual questions (the largest group),
# 1 questions that join several sessions, 2 dates and durations, 3 world-knowledge inferences.
CATEGORY_TABLE_VERSION = "v1"
CATEGORIES = {1: "multi_hop", 2: "temporal", 3: "open_domain", 4: "single_hop", 5: "adversarial"}

_ID = re.compile(r"D(\d+):(\d+)")
_SESSION = re.compile(r"session_(\d+)$")
REFUSAL_GOLD = "Not mentioned"


def parse_evidence_ids(raw: list[Any]) -> tuple[list[str], int]:
    """Clean ``D<s>:<t>`` ids from LoCoMo's evidence list and the count of entries that hold none.

    The full file has entries like ``"D8:6; D9:17"`` or ``"D9:1 D4:4"`` (several ids: all kept),
    ``"D"`` and ``"D:11:26"`` (no parseable id: counted).
    """
    ids: list[str] = []
    bad = 0
    for entry in raw:
        found = _ID.findall(str(entry)) if isinstance(entry, str) else []
        if not found:
            bad += 1
        for s, t in found:
            ident = f"D{int(s)}:{int(t)}"
            if ident not in ids:
                ids.append(ident)
    return ids, bad


def _turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn.get('speaker', '')}: {turn.get('text', '')}".strip()
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares a photo: {caption}]"
    return text


class LocomoAdapter(BaseAdapter):
    """Reads ``data/locomo10.json``; category 5 (adversarial) is excluded unless ``include_adversarial``."""

    def __init__(self, *, include_adversarial: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.include_adversarial = include_adversarial

    def read_spec(self) -> dict[str, Any]:
        return {"include_adversarial": self.include_adversarial, "categories": CATEGORY_TABLE_VERSION}

    def _read(self, reader: FileReader) -> tuple[list[Document], list[Query], dict[str, int]]:
        data = reader.read_json(FILE, top=list)
        file = str(reader.root / FILE)
        docs: list[Document] = []
        queries: list[Query] = []
        stats = {"evidence_unparseable": 0, "qa_without_evidence": 0, "qa_adversarial_excluded": 0,
                 "evidence_ids": 0}
        for ci, conv in enumerate(data):
            where = f"#{ci}"
            sample_id = str(require(conv, "sample_id", dataset=self.name, file=file, where=where, types=(str,)))
            where = f"#{ci} ({sample_id})"
            body = require(conv, "conversation", dataset=self.name, file=file, where=where, types=(dict,))
            sessions = sorted(
                (int(m.group(1)), key) for key in body if (m := _SESSION.match(key))
            )
            sections = []
            for n, key in sessions:
                turns = body[key]
                if not isinstance(turns, list):
                    continue
                date = str(body.get(f"{key}_date_time", ""))
                paras = tuple(
                    Paragraph(text=_turn_text(t), ref=str(t.get("dia_id")), meta={"speaker": t.get("speaker")})
                    for t in turns if isinstance(t, dict)
                )
                title = f"Session {n}" + (f" (DATE: {date})" if date else "")
                sections.append(Section(title=title, paragraphs=paras, ref=f"session_{n}", meta={"date": date}))
            title = f"Conversation {sample_id} between {body.get('speaker_a', '?')} and {body.get('speaker_b', '?')}"
            docs.append(Document(doc_id=sample_id, title=title, sections=tuple(sections)))

            qas = require(conv, "qa", dataset=self.name, file=file, where=where, types=(list,))
            for qi, qa in enumerate(qas):
                qwhere = f"{where} qa[{qi}]"
                question = require(qa, "question", dataset=self.name, file=file, where=qwhere, types=(str,))
                category = require(qa, "category", dataset=self.name, file=file, where=qwhere, types=(int,))
                ids, bad = parse_evidence_ids(qa.get("evidence") or [])
                stats["evidence_unparseable"] += bad
                stats["evidence_ids"] += len(ids)
                if not ids:
                    stats["qa_without_evidence"] += 1
                adversarial = category == 5
                if adversarial and not self.include_adversarial:
                    stats["qa_adversarial_excluded"] += 1
                    continue
                if adversarial:
                    answers: tuple[str, ...] = (REFUSAL_GOLD,)
                else:
                    answer = require(qa, "answer", dataset=self.name, file=file, where=qwhere, types=(str, int, float))
                    answers = (str(answer),)
                queries.append(Query(
                    qid=f"{sample_id}/q{qi}",
                    text=question,
                    answers=answers,
                    question_type=CATEGORIES.get(category, f"category_{category}"),
                    answerable=not adversarial,
                    evidence=tuple(Evidence(ref=i, doc_id=sample_id) for i in ids),
                    doc_ids=(sample_id,),
                    meta={"category": category,
                          **({"adversarial_answer": str(qa.get("adversarial_answer"))} if adversarial else {})},
                ))
        if stats["evidence_unparseable"]:
            log.warning("locomo: %d evidence entries hold no parseable dia_id (counted in stats)",
                        stats["evidence_unparseable"])
        return docs, queries, stats
