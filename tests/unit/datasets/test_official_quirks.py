"""Known quirks of the official files, as a table: each is loaded (never refused), handled the named way
for ragbench's own metrics and OpenViking's way for ``context/openviking_recall``, and counted in its
``dataset/*`` counter."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ragbench.datasets.financebench import FinanceBenchAdapter
from ragbench.datasets.locomo import LocomoAdapter
from ragbench.datasets.qasper import QasperAdapter
from ragbench.datasets.syllabusqa import SyllabusQAAdapter
from ragbench.errors import DatasetError
from ragbench.judge.context import openviking_evidence
from ragbench.types import EvalSet

ADAPTERS = {"locomo": LocomoAdapter, "qasper": QasperAdapter, "syllabusqa": SyllabusQAAdapter,
            "financebench": FinanceBenchAdapter}
LOCOMO = "data/locomo10.json"
FB_D, FB_Q = "data/financebench_document_information.jsonl", "data/financebench_open_source.jsonl"
# The official document file's two rows for this filing (patronus-ai/financebench): only doc_period differs.
FOOTLOCKER = {"doc_name": "FOOTLOCKER_2023_annualreport", "company": "Foot Locker", "gics_sector": "Consumer Discretionary",
              "doc_type": "10k_annualreport", "doc_period": 2023, "doc_link": "https://example.com/footlocker-2023.pdf"}


def locomo_evidence(value: list[str]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        p = root / LOCOMO
        data = json.loads(p.read_text(encoding="utf-8"))
        data[0]["qa"][0]["evidence"] = value
        p.write_text(json.dumps(data), encoding="utf-8")
    return apply


def jsonl(rel: str, change: Callable[[list[dict[str, Any]]], None]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        p = root / rel
        rows = [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
        change(rows)
        p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return apply


def query(es: EvalSet, qid: str):
    return next(q for q in es.queries if q.qid == qid)


def footlocker_twice(es: EvalSet) -> None:
    assert len(es.documents) == 27  # unreferenced, like the official file's: merged, not read


def float_selected(es: EvalSet) -> None:
    q = query(es, "9d578ddccc27dd849244d632dd0f6bf27348ad81")
    ours = [e.text for e in q.evidence]
    assert ours[0].startswith("Table 3: Performance of various models") and ours[0] in _qasper_captions(es)
    assert openviking_evidence(q)[0] == "FLOAT SELECTED: " + ours[0]


def _qasper_captions(es: EvalSet) -> set[str]:
    return {p.text for d in es.documents for s in d.sections if s.title == "Figures and tables" for p in s.paragraphs}


def untrimmed_span(es: EvalSet) -> None:
    q = query(es, "KllogPcCRgQL9y6I")
    assert q.evidence[0].text == "Reading Quizzes (20%)\n"  # ragbench's own evidence: verbatim
    assert openviking_evidence(q)[0] == "Reading Quizzes (20%)"  # OpenViking strips each span
    no_answer = [q for q in es.queries if q.meta["question_type_raw"] == "no answer"]
    assert len(no_answer) == 12 and all(openviking_evidence(q) is None for q in no_answer)  # OpenViking skips them


def zero_padded(es: EvalSet) -> None:
    q = query(es, "conv-26/q0")
    assert [e.ref for e in q.evidence] == ["D1:3"] and openviking_evidence(q) == ["D1:03"]


def stray_colon(es: EvalSet) -> None:
    q = query(es, "conv-26/q0")
    assert [e.ref for e in q.evidence] == ["D11:26"] and openviking_evidence(q) == ["D:11:26"]


def two_ids_in_one_entry(es: EvalSet) -> None:
    q = next(q for q in es.queries if "D8:6; D9:17" in (openviking_evidence(q) or []))
    assert [e.ref for e in q.evidence] == ["D8:6", "D9:17"]


def empty_evidence_text(es: EvalSet) -> None:
    q = query(es, "financebench_id_02987")
    assert len(q.evidence) == 2 and q.evidence[0].text == "" and q.evidence[0].ref  # the page stays gold
    assert openviking_evidence(q) == [q.evidence[1].text]  # OpenViking keeps non-empty evidence_text only


@dataclass(frozen=True)
class Quirk:
    dataset: str
    edit: Callable[[Path], None] | None  # None: the bundled sample has the quirk as released
    kwargs: dict[str, Any]
    counter: str
    count: int
    handling: Callable[[EvalSet], None]


QUIRKS = {
    "financebench-filing-listed-twice": Quirk(
        "financebench", jsonl(FB_D, lambda rs: rs.extend([FOOTLOCKER, {**FOOTLOCKER, "doc_period": 2022}])), {},
        "documents_merged", 1, footlocker_twice),
    "financebench-evidence-without-text": Quirk(
        "financebench", jsonl(FB_Q, lambda rs: rs[0]["evidence"][0].update(evidence_text="")), {},
        "evidence_without_text", 1, empty_evidence_text),
    "qasper-float-selected": Quirk("qasper", None, {}, "evidence_float_selected", 8, float_selected),
    "syllabusqa-trailing-newlines": Quirk("syllabusqa", None, {}, "evidence_untrimmed", 23, untrimmed_span),
    "locomo-zero-padded-id": Quirk("locomo", locomo_evidence(["D1:03"]), {}, "evidence_ids_zero_padded", 1,
                                   zero_padded),
    "locomo-stray-colon-id": Quirk("locomo", locomo_evidence(["D:11:26"]), {}, "evidence_ids_recovered", 1,
                                   stray_colon),
    "locomo-two-ids-in-one-entry": Quirk("locomo", None, {}, "evidence_entries_several_ids", 1,
                                         two_ids_in_one_entry),
}


@pytest.mark.parametrize("name", list(QUIRKS))
def test_official_quirk_is_loaded_handled_and_counted(name, sample_copy):
    quirk = QUIRKS[name]
    root = None
    if quirk.edit is not None:
        root = sample_copy(quirk.dataset)
        quirk.edit(root)
    es = ADAPTERS[quirk.dataset](name=quirk.dataset, path=str(root) if root else None, **quirk.kwargs).load()
    assert es.stats[quirk.counter] == quirk.count, dict(es.stats)
    quirk.handling(es)


def test_financebench_merge_is_logged(sample_copy, caplog):
    root = sample_copy("financebench")
    jsonl(FB_D, lambda rs: rs.extend([FOOTLOCKER, {**FOOTLOCKER, "doc_period": 2022}]))(root)
    with caplog.at_level(logging.INFO, logger="ragbench.datasets.financebench"):
        FinanceBenchAdapter(name="financebench", path=str(root)).load()
    assert "'FOOTLOCKER_2023_annualreport' is listed again on line 29" in caplog.text
    assert "'doc_period': (2023, 2022)" in caplog.text and "1 repeated doc_name rows" in caplog.text


def test_financebench_merged_row_of_a_referenced_filing_keeps_the_first(sample_copy):
    root = sample_copy("financebench")
    jsonl(FB_D, lambda rs: rs.append({**rs[0], "doc_period": 1999, "gics_sector": "Other"}))(root)
    es = FinanceBenchAdapter(name="financebench", path=str(root)).load()
    doc = next(d for d in es.documents if d.doc_id == "ACTIVISIONBLIZZARD_2019_10K")
    assert es.stats["documents_merged"] == 1 and doc.meta["doc_period"] == 2019
    assert doc.meta["gics_sector"] == "Communication Services"


@pytest.mark.parametrize(("field", "value"), [("doc_link", "https://example.com/other.pdf"),
                                              ("company", "Another Company"), ("doc_type", "10q")])
def test_financebench_two_filings_with_one_name_are_refused(field, value, sample_copy):
    root = sample_copy("financebench")
    jsonl(FB_D, lambda rs: rs.append({**rs[0], field: value}))(root)
    with pytest.raises(DatasetError) as info:
        FinanceBenchAdapter(name="financebench", path=str(root)).load()
    first, _, fix = str(info.value).partition("\n  fix: ")
    assert "'ACTIVISIONBLIZZARD_2019_10K' is listed again on line 28 for a different filing" in first
    assert f"({field} " in first and "re-download" not in fix and "its own doc_name" in fix


def test_financebench_two_questions_with_one_id_are_refused(sample_copy):
    root = sample_copy("financebench")
    jsonl(FB_Q, lambda rs: rs[1].update(financebench_id=rs[0]["financebench_id"]))(root)
    with pytest.raises(DatasetError) as info:
        FinanceBenchAdapter(name="financebench", path=str(root)).load()
    message = str(info.value)
    assert "question id 'financebench_id_02987' occurs 2 times" in message
    assert "give each question its own id" in message and FB_Q in message
