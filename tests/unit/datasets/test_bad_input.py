"""Bad input, as a table: every case is a tiny malformed copy of a bundled sample (or a bad config value)
and asserts either a named one-line error (type, key phrase, and the fix it names) or a documented,
counted handling (the exact ``dataset/*`` counter). Nothing may be accepted silently."""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ragbench.datasets.custom import CustomAdapter
from ragbench.datasets.financebench import FinanceBenchAdapter
from ragbench.datasets.locomo import LocomoAdapter
from ragbench.datasets.multihop_rag import MultiHopRAGAdapter
from ragbench.datasets.qasper import QasperAdapter
from ragbench.datasets.syllabusqa import SyllabusQAAdapter
from ragbench.errors import ConfigError, DatasetError, RagbenchError

ADAPTERS = {"locomo": LocomoAdapter, "qasper": QasperAdapter, "syllabusqa": SyllabusQAAdapter,
            "financebench": FinanceBenchAdapter, "multihop_rag": MultiHopRAGAdapter, "custom": CustomAdapter}
LOCOMO, QASPER = "data/locomo10.json", "qasper-train-v0.3.json"
FB_Q, FB_D = "data/financebench_open_source.jsonl", "data/financebench_document_information.jsonl"
SYL_TEST = "data/dataset_split/test.csv"
SYL_WORD = "syllabi/syllabi_redacted/word"


@dataclass(frozen=True)
class Error:
    """A named error: its type, a phrase of the message, and a phrase of the fix it names."""

    kind: type[RagbenchError]
    phrase: str
    fix: str


@dataclass(frozen=True)
class Counted:
    """A documented handling: the load succeeds and ``stats[key] == value`` (logged as dataset/<key>)."""

    key: str
    value: int


# ------------------------------------------------------------------ helpers that corrupt copies
def edit_json(rel: str, change: Callable[[Any], Any], *, whole: bool = False) -> Callable[[Path], None]:
    """Applies ``change`` to the parsed file (``whole``: the file becomes what ``change`` returns)."""
    def apply(root: Path) -> None:
        p = root / rel
        data = json.loads(p.read_text(encoding="utf-8"))
        out = change(data)
        p.write_text(json.dumps(out if whole else data), encoding="utf-8")
    return apply


def edit_text(rel: str, change: Callable[[str], str]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        p = root / rel
        p.write_text(change(p.read_text(encoding="utf-8")), encoding="utf-8")
    return apply


def edit_jsonl(rel: str, change: Callable[[list[dict[str, Any]]], None]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        p = root / rel
        rows = [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
        change(rows)
        p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return apply


def edit_csv(rel: str, change: Callable[[list[dict[str, str]]], None]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        p = root / rel
        rows = list(csv.DictReader(io.StringIO(p.read_text(encoding="utf-8"), newline="")))
        change(rows)
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
        p.write_text(buf.getvalue(), encoding="utf-8")
    return apply


def setter(*path: Any, value: Any) -> Callable[[Any], None]:
    def change(data: Any) -> None:
        for key in path[:-1]:
            data = data[key]
        data[path[-1]] = value
    return change


def first_paper(data: dict[str, Any]) -> dict[str, Any]:
    return data[next(iter(data))]


def docx_expanding_to(path: Path, mb: int) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", b" " * (mb * 1_000_000))


def row(rows: list[dict[str, str]], **values: str) -> None:
    rows[0].update(values)


def custom_folder(root: Path, qa: list[dict[str, Any]] | None = None, *, name: str = "qa.jsonl") -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "ferry.md").write_text("# Ferry\n\nThe ferry leaves the north pier at 7:15.\n", encoding="utf-8")
    (root / "notes.txt").write_text("The lighthouse keeper logs the weather at noon.\n", encoding="utf-8")
    rows = qa if qa is not None else [{"id": "a", "question": "When does the ferry leave?", "answers": ["7:15"]}]
    (root / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def qa_rows(*rows: dict[str, Any]) -> Callable[[Path], None]:
    return lambda root: custom_folder(root, list(rows))


GOOD = {"question": "When does the ferry leave?", "answers": ["7:15"]}


def dup_paper_id(root: Path) -> None:  # the same paper id twice: json.loads would keep the last silently
    p = root / QASPER
    data = json.loads(p.read_text(encoding="utf-8"))
    pid, paper = next(iter(data.items()))
    body = json.dumps(paper)
    p.write_text("{" + f"{json.dumps(pid)}: {body}, {json.dumps(pid)}: {body}" + "}", encoding="utf-8")


def syllabus_bomb(root: Path) -> None:
    for p in (root / SYL_WORD).glob("*.docx"):
        p.chmod(0o644)
        docx_expanding_to(p, 3)


def fb_pdfs(root: Path) -> None:
    (root / "pdfs").mkdir()


def custom_pdf(root: Path) -> None:
    from tests.unit.datasets.conftest import make_pdf

    custom_folder(root)
    (root / "report.pdf").write_bytes(make_pdf(["Revenue grew by 12 percent in 2023. " * 20]))


# ------------------------------------------------------------------ the table
# (case id, dataset, corrupt(root) or None for the bundled sample, adapter kwargs, expected outcome)
CASES: list[tuple[str, str, Callable[[Path], None] | None, dict[str, Any], Error | Counted]] = [
    # LoCoMo
    ("locomo-duplicate-sample-id", "locomo",
     edit_json(LOCOMO, lambda d: d[1].__setitem__("sample_id", d[0]["sample_id"])), {},
     Error(DatasetError, "document id 'conv-26' occurs 2 times", "own id")),
    ("locomo-session-not-a-list", "locomo", edit_json(LOCOMO, setter(0, "conversation", "session_1", value="hi")), {},
     Error(DatasetError, "field 'session_1': expected list, found str", "official")),
    ("locomo-turn-not-an-object", "locomo", edit_json(LOCOMO, setter(0, "conversation", "session_1", 0, value="x")),
     {}, Error(DatasetError, "session_1[0]: expected a JSON object", "official")),
    ("locomo-turn-without-dia-id", "locomo",
     edit_json(LOCOMO, lambda d: d[0]["conversation"]["session_1"][0].pop("dia_id")), {},
     Error(DatasetError, "field 'dia_id': required field is missing", "official")),
    ("locomo-nan-answer", "locomo", edit_text(LOCOMO, lambda t: t.replace('"answer": "7 May 2023"', '"answer": NaN', 1)),
     {}, Error(DatasetError, "NaN is not a JSON number", "correct that value")),
    ("locomo-infinity-answer", "locomo",
     edit_text(LOCOMO, lambda t: t.replace('"answer": "7 May 2023"', '"answer": -Infinity', 1)), {},
     Error(DatasetError, "-Infinity is not a JSON number", "correct that value")),
    ("locomo-overflow-answer", "locomo",
     edit_text(LOCOMO, lambda t: t.replace('"answer": "7 May 2023"', '"answer": 1e999', 1)), {},
     Error(DatasetError, "the number 1e999 is out of range", "correct that value")),
    ("locomo-repeated-key", "locomo", edit_text(LOCOMO, lambda t: t.replace('"category": 2', '"category": 2, "category": 4', 1)),
     {}, Error(DatasetError, "holds the key 'category' twice", "re-download")),
    ("locomo-empty-question", "locomo", edit_json(LOCOMO, setter(0, "qa", 0, "question", value="  ")), {},
     Counted("qa_dropped_empty_question", 1)),
    ("locomo-empty-gold", "locomo", edit_json(LOCOMO, setter(0, "qa", 0, "answer", value="")), {},
     Counted("qa_dropped_no_gold", 1)),
    ("locomo-evidence-stray-colon", "locomo", edit_json(LOCOMO, setter(0, "qa", 0, "evidence", value=["D:1:3"])), {},
     Counted("evidence_ids_recovered", 1)),
    ("locomo-evidence-unparseable", "locomo", edit_json(LOCOMO, setter(0, "qa", 0, "evidence", value=["D"])), {},
     Counted("evidence_unparseable", 1)),
    ("locomo-evidence-not-a-list", "locomo", edit_json(LOCOMO, setter(0, "qa", 0, "evidence", value="D1:3")), {},
     Error(DatasetError, "field 'evidence': expected list, found str", "official")),
    ("locomo-category-not-int", "locomo", edit_json(LOCOMO, setter(0, "qa", 0, "category", value="2")), {},
     Error(DatasetError, "field 'category': expected int", "official")),
    ("locomo-top-level-object", "locomo", edit_json(LOCOMO, lambda d: {"data": d}, whole=True), {},
     Error(DatasetError, "top level is a JSON dict, expected a JSON array", "official file")),
    ("locomo-truncated", "locomo", edit_text(LOCOMO, lambda t: t[: len(t) // 2]), {},
     Error(DatasetError, "invalid JSON at line", "re-download")),
    # Qasper
    ("qasper-duplicate-question-id", "qasper",
     edit_json(QASPER, lambda d: list(d.values())[1]["qas"][0].__setitem__(
         "question_id", list(d.values())[0]["qas"][0]["question_id"])), {},
     Error(DatasetError, "question id", "own id")),
    ("qasper-duplicate-paper-id", "qasper", dup_paper_id, {},
     Error(DatasetError, "holds the key '1909.00694' twice", "re-download")),
    ("qasper-question-without-annotations", "qasper",
     edit_json(QASPER, lambda d: first_paper(d)["qas"][0].__setitem__("answers", [])), {},
     Counted("qa_dropped_no_annotation", 1)),
    ("qasper-paragraph-none", "qasper", edit_json(QASPER, lambda d: first_paper(d)["full_text"][0]["paragraphs"].append(None)),
     {}, Error(DatasetError, "expected a paragraph string, found NoneType", "official")),
    ("qasper-evidence-number", "qasper",
     edit_json(QASPER, lambda d: first_paper(d)["qas"][0]["answers"][0]["answer"]["evidence"].append(7)), {},
     Error(DatasetError, "expected an evidence string, found int", "official")),
    ("qasper-nan", "qasper", edit_text(QASPER, lambda t: t.replace('"yes_no": null', '"yes_no": NaN', 1)), {},
     Error(DatasetError, "NaN is not a JSON number", "correct that value")),
    ("qasper-empty-question", "qasper", edit_json(QASPER, lambda d: first_paper(d)["qas"][0].__setitem__("question", "")),
     {}, Counted("qa_dropped_empty_question", 1)),
    ("qasper-full-text-not-list", "qasper", edit_json(QASPER, lambda d: first_paper(d).__setitem__("full_text", "x")), {},
     Error(DatasetError, "field 'full_text': expected list", "official")),
    ("qasper-top-level-array", "qasper", edit_json(QASPER, lambda d: list(d.values()), whole=True), {},
     Error(DatasetError, "expected a JSON object", "official file")),
    # SyllabusQA
    ("syllabusqa-name-escapes-dataset", "syllabusqa",
     edit_csv(SYL_TEST, lambda rs: row(rs, syllabus_name="../../../../etc/hostname")), {},
     Error(DatasetError, "names a file outside dataset.path", "may only name files below")),
    # an absolute name is joined below the syllabi folder (".../text//etc/hostname.txt"): it stays inside
    ("syllabusqa-absolute-name-stays-inside", "syllabusqa",
     edit_csv(SYL_TEST, lambda rs: row(rs, syllabus_name="/etc/hostname")), {},
     Error(DatasetError, "syllabi/syllabi_redacted/text/etc/hostname.txt does not exist", "place the syllabus at")),
    ("syllabusqa-duplicate-id", "syllabusqa", edit_csv(SYL_TEST, lambda rs: rs[1].update(id=rs[0]["id"])), {},
     Counted("qa_duplicate_id", 1)),
    ("syllabusqa-empty-question", "syllabusqa", edit_csv(SYL_TEST, lambda rs: row(rs, question="")), {},
     Counted("qa_dropped_empty_question", 1)),
    ("syllabusqa-empty-gold", "syllabusqa",
     edit_csv(SYL_TEST, lambda rs: row(rs, answer="", question_type="single factual")), {},
     Counted("qa_dropped_no_gold", 1)),
    ("syllabusqa-missing-syllabus", "syllabusqa", edit_csv(SYL_TEST, lambda rs: row(rs, syllabus_name="Nope 101")), {},
     Error(DatasetError, "does not exist", "place the syllabus at")),
    ("syllabusqa-docx-bomb", "syllabusqa", syllabus_bomb,
     {"syllabus_format": "word", "max_decompressed_mb": 1},
     Error(DatasetError, "over the limit dataset.max_decompressed_mb=1", "raise the limit (dataset.max_decompressed_mb=4)")),
    ("syllabusqa-docx-text-too-large", "syllabusqa", None, {"syllabus_format": "word", "max_document_mb": 0.001},
     Error(DatasetError, "the text of the .docx is", "raise the limit (dataset.max_document_mb=")),
    ("syllabusqa-document-too-large", "syllabusqa", None, {"max_document_mb": 0.001},
     Error(DatasetError, "over the limit dataset.max_document_mb=0.001", "raise the limit (dataset.max_document_mb=")),
    ("syllabusqa-json-nan", "syllabusqa", edit_text("data/dataset_split/test.json", lambda t: t.replace("null", "NaN", 1)),
     {"split_format": "json"}, Error(DatasetError, "NaN is not a JSON number", "correct that value")),
    ("syllabusqa-bad-split", "syllabusqa", None, {"split": "dev"}, Error(ConfigError, "dataset.split='dev'", "choose one of")),
    # FinanceBench
    ("financebench-duplicate-id", "financebench",
     edit_jsonl(FB_Q, lambda rs: rs[1].update(financebench_id=rs[0]["financebench_id"])), {},
     Error(DatasetError, "question id 'financebench_id_02987' occurs 2 times", "own id")),
    ("financebench-repeated-document-row", "financebench", edit_jsonl(FB_D, lambda rs: rs.append(dict(rs[0]))), {},
     Counted("documents_merged", 1)),
    ("financebench-two-filings-one-name", "financebench",
     edit_jsonl(FB_D, lambda rs: rs.append({**rs[0], "doc_link": "https://example.com/x.pdf"})), {},
     Error(DatasetError, "'ACTIVISIONBLIZZARD_2019_10K' is listed again on line 28 for a different filing",
           "its own doc_name")),
    ("financebench-doc-name-escapes", "financebench",
     lambda root: (fb_pdfs(root), edit_jsonl(FB_D, lambda rs: rs.append({"doc_name": "../../../etc/x"}))(root),
                   edit_jsonl(FB_Q, lambda rs: rs[0].update(doc_name="../../../etc/x"))(root)),
     {"corpus": "pdfs"}, Error(DatasetError, "names a file outside dataset.path", "may only name files below")),
    ("financebench-negative-page", "financebench",
     edit_jsonl(FB_Q, lambda rs: rs[0]["evidence"][0].update(evidence_page_num=-1)), {},
     Error(DatasetError, "evidence_page_num must be a page index >= 0", "zero-based")),
    ("financebench-nan-answer", "financebench",
     edit_text(FB_Q, lambda t: t.replace('"answer":"24.26"', '"answer":NaN', 1)), {},
     Error(DatasetError, "on line 1: NaN is not a JSON number", "correct that value")),
    ("financebench-empty-gold", "financebench", edit_jsonl(FB_Q, lambda rs: rs[0].update(answer=" ")), {},
     Counted("qa_dropped_no_gold", 1)),
    ("financebench-unknown-document", "financebench", edit_jsonl(FB_Q, lambda rs: rs[0].update(doc_name="NOPE")), {},
     Error(DatasetError, "which data/financebench_document_information.jsonl does not list", "same release")),
    # MultiHop-RAG
    ("multihop-empty-query", "multihop_rag", edit_json("MultiHopRAG.json", setter(0, "query", value="")), {},
     Counted("qa_dropped_empty_question", 1)),
    ("multihop-nan-answer", "multihop_rag",
     edit_text("MultiHopRAG.json", lambda t: t.replace('"answer": "Harborview Robotics"', '"answer": NaN', 1)), {},
     Error(DatasetError, "NaN is not a JSON number", "correct that value")),
    ("multihop-repeated-key", "multihop_rag", edit_text("corpus.json", lambda t: t.replace('"author":', '"title": "x", "author":', 1)),
     {}, Error(DatasetError, "holds the key 'title' twice", "re-download")),
    ("multihop-unknown-article", "multihop_rag",
     edit_json("MultiHopRAG.json", lambda d: d[0]["evidence_list"][0].update(url="https://nowhere.example/x",
                                                                              title="Nowhere")), {},
     Error(DatasetError, "evidence names an article that is not in corpus.json", "same MultiHop-RAG release")),
    ("multihop-duplicate-article", "multihop_rag", edit_json("corpus.json", lambda d: d.append(dict(d[0]))), {},
     Counted("articles_duplicate", 1)),
    ("multihop-empty-gold", "multihop_rag", edit_json("MultiHopRAG.json", setter(0, "answer", value="")), {},
     Counted("qa_dropped_no_gold", 1)),
    # custom
    ("custom-empty-answers", "custom", qa_rows({"question": "Who built the pier?", "answers": []}), {},
     Error(DatasetError, "an answerable question needs a non-empty gold answer", '"answerable": false')),
    ("custom-blank-answer", "custom", qa_rows({"question": "Who built the pier?", "answers": [" "]}), {},
     Error(DatasetError, "needs a non-empty gold answer", '"answers": ["..."]')),
    ("custom-duplicate-id", "custom", qa_rows({**GOOD, "id": "x"}, {**GOOD, "id": "x"}), {},
     Error(DatasetError, "question id 'x' occurs 2 times", "own id")),
    ("custom-mixed-ids-refused", "custom", qa_rows({**GOOD, "id": "q2"}, GOOD), {},
     Error(DatasetError, "field 'id': the file mixes lines with an 'id' (1) and lines without one (line 2)",
           "give every line its own id, or remove them all")),
    ("custom-mixed-ids-no-collision-still-refused", "custom", qa_rows(GOOD, {**GOOD, "id": "mine"}, GOOD), {},
     Error(DatasetError, "lines without one (line 1, 3)", "give every line its own id")),
    ("custom-evidence-a-number", "custom", qa_rows({**GOOD, "evidence": 42}), {},
     Error(DatasetError, "line 1, field 'evidence': evidence must be a list, found int 42", '"evidence": ["quote"')),
    ("custom-evidence-a-string", "custom", qa_rows({**GOOD, "evidence": "7:15"}), {},
     Error(DatasetError, "evidence must be a list, found str '7:15'", '"evidence": ["quote"')),
    ("custom-empty-question", "custom", qa_rows(GOOD, {**GOOD, "question": ""}), {},
     Counted("qa_dropped_empty_question", 1)),
    ("custom-nan-relevance", "custom",
     lambda root: (custom_folder(root), (root / "qa.jsonl").write_text(
         '{"question": "q?", "answers": ["a"], "evidence": [{"text": "7:15", "relevance": NaN}]}\n')), {},
     Error(DatasetError, "NaN is not a JSON number", "correct that value")),
    ("custom-unanswerable-with-empty-answers-is-a-refusal", "custom",
     qa_rows(GOOD, {"question": "Who built the pier?", "answers": [], "answerable": False}), {},
     Counted("qa_dropped_no_gold", 0)),
    ("custom-document-too-large", "custom",
     lambda root: (custom_folder(root), (root / "big.txt").write_text("word " * 2_000)), {"max_document_mb": 0.005},
     Error(DatasetError, "the document file is 0.01 MB, over the limit dataset.max_document_mb=0.005",
           "raise the limit (dataset.max_document_mb=2)")),
    ("custom-pdf-text-too-large", "custom", custom_pdf, {"max_document_mb": 0.0005},
     Error(DatasetError, "the text of the .pdf is 0.000719 MB", "raise the limit (dataset.max_document_mb=2)")),
    ("custom-pdf-file-over-decompressed-limit", "custom", custom_pdf, {"max_decompressed_mb": 0.0001},
     Error(DatasetError, "the .pdf file is 0.00131 MB", "raise the limit (dataset.max_decompressed_mb=2)")),
    ("custom-easyrag-empty-reference", "custom",
     lambda root: (custom_folder(root), (root / "eval.json").write_text(json.dumps(
         [{"id": 1, "question": "q?", "reference_answer": "", "answerable": True, "evidence": []}]))),
     {"qa_file": "eval.json"}, Error(DatasetError, "needs a non-empty reference_answer", '"answerable": false')),
    ("custom-doc-id-outside-the-corpus", "custom", qa_rows({**GOOD, "doc_ids": ["../../etc/passwd"]}), {},
     Error(DatasetError, "no document '../../etc/passwd' in the corpus", "name a file below")),
    ("custom-path-missing", "custom", None, {"path": "/nonexistent/kb"},
     Error(DatasetError, "dataset.path does not exist", "create that folder")),
    ("custom-path-null", "custom", None, {"path": None}, Error(DatasetError, "needs dataset.path", "dataset.path=")),
    ("custom-qa-file-missing", "custom", lambda root: custom_folder(root), {"qa_file": "nope.jsonl"},
     Error(DatasetError, "file not found", "place the file at")),
]

# bad values of the dataset config keys every adapter shares (checked when the adapter is built)
CONFIG_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("seed-nan", {"seed": math.nan}, "dataset.seed must be a whole number"),
    ("seed-float", {"seed": 1.5}, "dataset.seed must be a whole number"),
    ("seed-string", {"seed": "abc"}, "dataset.seed must be a whole number"),
    ("seed-negative", {"seed": -1}, "dataset.seed must be between 0 and 2**63-1"),
    ("sample-size-negative", {"sample_size": -3}, "dataset.sample_size must be >= 1"),
    ("sample-size-nan", {"sample_size": math.nan}, "dataset.sample_size must be a whole number >= 1"),
    ("num-docs-zero", {"num_docs": 0}, "dataset.num_docs must be >= 1"),
    ("num-docs-bool", {"num_docs": True}, "dataset.num_docs must be a whole number >= 1"),
    ("both-sampling-keys", {"num_docs": 1, "sample_size": 1}, "set only one of dataset.num_docs"),
    ("stratify-string", {"stratify": "yes"}, "dataset.stratify must be true or false"),
    ("max-document-nan", {"max_document_mb": math.nan},
     "dataset.max_document_mb=nan is not valid: use a finite number > 0 (default: dataset.max_document_mb=32)"),
    ("max-document-zero", {"max_document_mb": 0}, "dataset.max_document_mb=0 is not valid: use a finite number > 0"),
    ("max-decompressed-inf", {"max_decompressed_mb": math.inf},
     "dataset.max_decompressed_mb=inf is not valid: use a finite number > 0"),
    ("variant-bad", {"variant": "mini"}, "dataset.variant='mini' is not valid"),
]


def _load(name: str, root: Path | None, kwargs: dict[str, Any]):
    kw = dict(kwargs)
    if name == "custom":
        kw.setdefault("path", str(root) if root else None)
    elif root is not None:
        kw["path"] = str(root)
    return ADAPTERS[name](name=name, **kw).load()


@pytest.mark.parametrize(("dataset", "corrupt", "kwargs", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_data(dataset, corrupt, kwargs, expected, sample_copy, tmp_path):
    root: Path | None = None
    if corrupt is not None:
        root = tmp_path / "kb" if dataset == "custom" else sample_copy(dataset)
        corrupt(root)
    if isinstance(expected, Error):
        with pytest.raises(expected.kind) as info:
            _load(dataset, root, kwargs)
        message = str(info.value)
        first, _, fix = message.partition("\n  fix: ")
        assert expected.phrase in first, message
        assert "\n" not in first and "\n" not in fix, message  # one line of error (and one of fix)
        assert expected.fix in (fix or first), message
        if expected.kind is DatasetError:
            assert fix, f"no fix named: {message}"
    else:
        es = _load(dataset, root, kwargs)
        assert es.stats[expected.key] == expected.value, dict(es.stats)


@pytest.mark.parametrize(("dataset", "kwargs", "phrase"),
                         [(d, kw, phrase) for _, kw, phrase in CONFIG_CASES for d in ("locomo", "custom")],
                         ids=[f"{d}-{cid}" for cid, _, _ in CONFIG_CASES for d in ("locomo", "custom")])
def test_bad_config_values(dataset, kwargs, phrase):
    with pytest.raises(ConfigError) as info:
        ADAPTERS[dataset](name=dataset, **kwargs)
    assert phrase in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(("dataset", "kwargs", "real", "kept"), [
    ("qasper", {"num_docs": 50}, "only 3 documents", 3),
    ("syllabusqa", {"sample_size": 100}, "only 84 questions", 84),
    ("locomo", {"num_docs": 5}, "only 2 documents", 2),
])
def test_oversized_samples_keep_everything_with_a_warning(dataset, kwargs, real, kept, caplog):
    with caplog.at_level(logging.WARNING):
        es = ADAPTERS[dataset](name=dataset, **kwargs).load()
    assert real in caplog.text and "using all" in caplog.text
    assert kept == (len(es.documents) if "num_docs" in kwargs else len(es.queries))
