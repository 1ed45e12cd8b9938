"""Question files of the custom adapter: ragbench QA JSONL and EasyRAG evaluation-set JSON."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ragbench.datasets.base import require
from ragbench.datasets.conversations import parse_conversation
from ragbench.errors import DatasetError
from ragbench.text import NOT_MENTIONED
from ragbench.types import Turn

DEFAULT_TYPE = "general"


@dataclass(frozen=True)
class RawEvidence:
    """One evidence item as written in the QA file, before its document id is resolved."""

    text: str | None
    ref: str | None
    doc: str | None
    relevance: int
    doc_field: str = "doc_id"


@dataclass(frozen=True)
class RawQA:
    """One question as written in the QA file (``where`` locates it for error messages)."""

    qid: str
    question: str
    answers: tuple[str, ...]
    question_type: str
    answerable: bool
    evidence: tuple[RawEvidence, ...]
    docs: tuple[str, ...]
    where: str
    meta: Mapping[str, Any]
    conversation: str | None = None  # a conversation's turn: its id, index and earlier turns
    turn: int = 0
    history: tuple[Turn, ...] = ()


Check = Callable[..., Any]


def _checker(dataset: str, file: str) -> Check:
    def check(record: Any, key: str, where: str, types: tuple[type, ...]) -> Any:
        return require(record, key, dataset=dataset, file=file, where=where, types=types, own=True)
    return check


def _relevance(value: Any, *, dataset: str, file: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or int(value) != value:
        raise DatasetError(f"relevance must be a whole number >= 0, found {value!r}", dataset=dataset,
                           file=file, record=where, field="relevance",
                           fix="use EasyRAG's grades 0-3 (0 irrelevant ... 3 direct evidence)")
    return int(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def given(row: Any) -> bool:
    """Whether a QA line carries its own ``id`` (a blank or null one counts as none)."""
    return isinstance(row, dict) and row.get("id") not in (None, "")


def _one_id_rule(rows: list[dict[str, Any]], *, dataset: str, file: str) -> None:
    """Every line has an ``id`` or none has: a line without one is ``q<line>``, which could be an id
    written on another line (then the duplicate-id error would name an id the user wrote once)."""
    without = [n for n, row in enumerate(rows, start=1) if not given(row)]
    with_id = len(rows) - len(without)
    if with_id and without:
        shown = ", ".join(map(str, without[:5])) + (f" and {len(without) - 5} more" if len(without) > 5 else "")
        raise DatasetError(f"the file mixes lines with an 'id' ({with_id}) and lines without one (line {shown}); "
                           "a generated id (q<line>) could equal one written", dataset=dataset, file=file, field="id",
                           fix="give every line its own id, or remove them all (then each is q<line number>)")


EVIDENCE_FORMS = ('"evidence": ["a quote from a document", "file.md"] (a string that names a document by its id, '
                  'file name or stem is that document), [{"text": "quote", "doc_id": "file.md"}], '
                  '[{"doc_id": "file.md", "relevance": 2}], or "doc_ids": ["file.md"]')


def parse_jsonl(rows: list[dict[str, Any]], *, dataset: str, file: str) -> list[RawQA]:
    """ragbench QA JSONL: ``question``, ``answers`` (list or string; optional: a question without it is
    scored on retrieval only), optional ``id`` (on every line or on none: then ``q<line>``),
    ``question_type``, ``answerable``, ``doc_ids`` and ``evidence`` (strings: quotes or document names;
    objects ``{text, ref, doc_id, relevance}``, of which ``{doc_id}`` alone names a relevant document)."""
    _one_id_rule(rows, dataset=dataset, file=file)
    out: list[RawQA] = []
    conversations: dict[str, int] = {}  # conversation id -> its line (ragbench.datasets.conversations)
    for n, row in enumerate(rows, start=1):
        if isinstance(row, dict) and "turns" in row:
            out.extend(parse_conversation(row, n, conversations, parse_row, dataset=dataset, file=file))
            continue
        out.append(parse_row(row, f"line {n}", str(row["id"]) if given(row) else f"q{n}", dataset=dataset,
                             file=file))
    return out


def parse_row(row: Any, where: str, qid: str, *, dataset: str, file: str) -> RawQA:
    """One question of a ragbench QA JSONL file (a line, or a turn of a conversation line)."""
    check = _checker(dataset, file)
    question = check(row, "question", where, (str,))
    answers = check(row, "answers", where, (list, str)) if isinstance(row, dict) and "answers" in row else []
    answers = [answers] if isinstance(answers, str) else answers
    for a in answers:
        if not isinstance(a, str | int | float) or isinstance(a, bool):
            raise DatasetError(f"answers must be strings, found {type(a).__name__}", dataset=dataset,
                               file=file, record=where, field="answers", fix='write "answers": ["..."]')
    answerable = row.get("answerable", True)
    if not isinstance(answerable, bool):
        check(row, "answerable", where, (bool,))
    if answerable and "answers" in row and not any(str(a).strip() for a in answers):
        # a blank gold would score a refusal ("Not mentioned") as F1 1.0
        raise DatasetError("an answerable question needs a non-empty gold answer", dataset=dataset, file=file,
                           record=where, field="answers",
                           fix='write "answers": ["..."], "answerable": false for a question the '
                           'documents cannot answer, or leave "answers" out to score retrieval only')
    items = row.get("evidence")
    if items is not None and not isinstance(items, list):
        raise DatasetError(f"evidence must be a list, found {type(items).__name__} {_short(items)}",
                           dataset=dataset, file=file, record=where, field="evidence",
                           fix='write "evidence": ["quote", {"text": "quote", "doc_id": "file.md"}], or leave '
                           "it out")
    evidence: list[RawEvidence] = []
    for ei, item in enumerate(items or []):
        ewhere = f"{where} evidence[{ei}]"
        if isinstance(item, str):
            evidence.append(RawEvidence(text=item, ref=None, doc=None, relevance=1))
            continue
        if not isinstance(item, dict) or not (item.get("text") or item.get("ref") or item.get("doc_id")):
            raise DatasetError("an evidence item must be a string or an object with 'text', 'ref' or 'doc_id'",
                               dataset=dataset, file=file, record=ewhere, field="evidence",
                               fix=f"write {EVIDENCE_FORMS}")
        evidence.append(RawEvidence(
            text=str(item["text"]) if item.get("text") else None,
            ref=str(item["ref"]) if item.get("ref") else None,
            doc=str(item["doc_id"]) if item.get("doc_id") else None,
            relevance=_relevance(item.get("relevance", 1), dataset=dataset, file=file, where=ewhere),
            doc_field="evidence.doc_id",
        ))
    docs = row.get("doc_ids") or []
    if not isinstance(docs, list):
        check(row, "doc_ids", where, (list,))
    qtype = row.get("question_type") or DEFAULT_TYPE
    return RawQA(
        qid=qid, question=question,
        answers=tuple(str(a) for a in answers) or ((NOT_MENTIONED,) if not answerable else ()),
        question_type=str(qtype), answerable=answerable, evidence=tuple(evidence),
        docs=tuple(str(d) for d in docs), where=where, meta=case_fields(row, where, dataset=dataset, file=file),
    )


CASE_FIELDS = {  # optional fields of a QA line kept in the question's meta: the fix each wrong type names
    "tags": 'write "tags": ["label", ...] (strings: by_tag/<tag>/* metrics split on them)',
    "citation_required": 'write "citation_required": true or false (true: answer/citation_missing is scored)',
    "options": 'write "options": ["first option", "second option", ...] (strings; A, B, ... in that order)',
}


def case_fields(row: dict[str, Any], where: str, *, dataset: str, file: str) -> dict[str, Any]:
    """``tags`` (a list of strings), ``citation_required`` (true/false) and ``options`` (a multiple-choice
    question's options, a list of strings) of a QA line, as given; a wrong type is a DatasetError naming the
    file, the line and the field."""
    out: dict[str, Any] = {}
    for key, fix in CASE_FIELDS.items():
        if row.get(key) is None:
            continue
        value = row[key]
        ok = (isinstance(value, bool) if key == "citation_required" else
              isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value))
        if not ok:
            raise DatasetError(f"{key} has the wrong type, found {_short(value)}", dataset=dataset, file=file,
                               record=where, field=key, fix=fix)
        out[key] = tuple(v.strip() for v in value) if isinstance(value, list) else value
    return out


def parse_easyrag(data: Any, *, dataset: str, file: str) -> list[RawQA]:
    """EasyRAG evaluation set: a JSON list (or ``{"samples": [...]}``) of ``{id, question,
    reference_answer, evidence[{document_id, node_id, quote, relevance}], difficulty, question_type,
    answerable}``. Evidence graded 0 (irrelevant) is not gold and is left out."""
    check = _checker(dataset, file)
    if isinstance(data, dict):
        data = check(data, "samples", "top level", (list,))
    out: list[RawQA] = []
    for n, row in enumerate(data):
        where = f"#{n}"
        qid = str(check(row, "id", where, (str, int)))
        where = f"#{n} (id {qid})"
        question = check(row, "question", where, (str,))
        answerable = check(row, "answerable", where, (bool,))
        answer = row.get("reference_answer")
        if answerable:
            answer = check(row, "reference_answer", where, (str, int, float))
            if not str(answer).strip():
                raise DatasetError("an answerable question needs a non-empty reference_answer", dataset=dataset,
                                   file=file, record=where, field="reference_answer",
                                   fix='write the gold answer, or "answerable": false')
        elif answer is not None and not isinstance(answer, str | int | float):
            check(row, "reference_answer", where, (str,))
        evidence: list[RawEvidence] = []
        node_ids: list[str] = []
        for ei, item in enumerate(check(row, "evidence", where, (list,))):
            ewhere = f"{where} evidence[{ei}]"
            quote = item.get("quote") if isinstance(item, dict) else None
            node = item.get("node_id") if isinstance(item, dict) else None
            named = item.get("document_id") if isinstance(item, dict) else None
            if not quote and not node and not named:  # document_id alone: that document is the evidence
                check(item, "quote", ewhere, (str,))
            relevance = _relevance(item.get("relevance", 1), dataset=dataset, file=file, where=ewhere)
            if node:
                node_ids.append(str(node))
            if relevance == 0:
                continue
            # EasyRAG node ids name EasyRAG's own chunks: the quote is what locates the evidence here.
            evidence.append(RawEvidence(
                text=str(quote) if quote else None, ref=None if quote or not node else str(node),
                doc=str(item["document_id"]) if item.get("document_id") else None, relevance=relevance,
                doc_field="evidence.document_id",
            ))
        out.append(RawQA(
            qid=qid, question=question,
            answers=(str(answer),) if answer is not None else (NOT_MENTIONED,),
            question_type=str(row.get("question_type") or DEFAULT_TYPE), answerable=answerable,
            evidence=tuple(evidence), docs=(), where=where,
            meta={"difficulty": row.get("difficulty"), "evidence_node_ids": ",".join(node_ids),
                  "evidence_irrelevant": sum(1 for e in row["evidence"] if isinstance(e, dict)
                                             and e.get("relevance") == 0)},
        ))
    return out
