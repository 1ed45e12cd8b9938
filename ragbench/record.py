"""A job's record: one typed, versioned ``RunRecord`` (``run.json``) and its ``CaseRecord`` lines
(``cases.jsonl``), written by one writer into the job's output folder as the job goes.

The record is the source; MLflow is one sink of it (``ragbench.tracking.mlflow_sink``), and ``compare``,
``verify`` and the reports read it. ``RecordWriter`` appends each case when it finishes, so a job that is
interrupted or killed keeps the cases it did in ``<job output dir>/record/cases.jsonl``; ``run.json`` says
``RUNNING`` until the job ends, then holds its status and results.

Layouts: ``ragbench-run/2`` (this one: ``run.json`` beside ``cases.jsonl``); runs logged before it have
``cases.jsonl`` (same lines) with ``case_scores.json`` and ``summary.json`` and no ``run.json``: their
record is read from the MLflow run itself (``ragbench.compare.select``).

A record's ``kind`` says what wrote it: ``job``, or ``calibration`` (``python -m ragbench.judge calibrate``:
one case line per labelled item, ``item_record``); a ``run.json`` written before the field is a job's.
A calibration run logged before its record has only ``case_scores.json``: ``stored_cases`` migrates it
to case lines, here and nowhere else. Nothing writes ``case_scores.json`` any more.

A case line holds everything ``ragbench.verify`` needs to recompute its retrieval, context and answer
scores without the corpus, the index or any model: the ranked chunk ids down to the deepest cut-off any
metric uses, with each hit's document and the evidence units it covers; the qrels at chunk and
evidence-unit level; the evidence strings; the texts of the top-k hits; every context the generator read;
the gold answers and the query facts the answer metrics read; per model judge, its notes.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ragbench import __version__
from ragbench import identity as run_identity
from ragbench.errors import RagbenchError
from ragbench.evidence import Coverage, EvidenceMap, context_has_evidence, hit_units
from ragbench.job_metrics import at_k_views, job_metrics, queries_by_type
from ragbench.jsonio import NestedTooDeep, loads_bounded
from ragbench.judge.context import context_refs, openviking_evidence
from ragbench.judge.document import record_fields as document_record
from ragbench.judge.retrieval import metric_ks
from ragbench.redact import redact
from ragbench.trace import gold_path_tags
from ragbench.types import CaseResult, ChunkTree

if TYPE_CHECKING:
    from ragbench.components import JobResult
    from ragbench.judge.calibrate import Calibration
    from ragbench.judge.labels import LabelledItem, LabelSet

RUN_FORMAT = "ragbench-run/2"
KINDS = ("job", "calibration")  # RunRecord.kind: a job, or ``python -m ragbench.judge calibrate``
RECORD_VERSION = 1  # a case line's layout (unchanged since the first record)
RUN_FILE = "run.json"
CASES_ARTIFACT = "cases.jsonl"
REUSED_FROM = "ragbench.reused_from"  # a resumed job's copy names the run that ran it (ragbench.job)
EMPTY_MAP = EvidenceMap(anchors=(), relevance=(), texts=(), how=())


def cases_run_id(run: Any) -> str:
    """The MLflow run whose artifacts hold ``run``'s record: the run itself, or for a copy that resume put
    in a later sweep (its artifacts hard links to, or copies of, the origin's) the run that ran the job."""
    return str(run.data.tags.get(REUSED_FROM) or run.info.run_id)


@dataclass(frozen=True)
class RunRecord:
    """One job: what it was (config, component params, versions, commit, identity), what it read
    (fingerprints, dataset facts) and how it ended (status, error, results)."""

    name: str
    job_hash: str
    config: Mapping[str, Any]  # the resolved config
    kind: str = "job"  # KINDS: a job, or a judge's calibration (a record without the field: a job)
    params: Mapping[str, Any] = field(default_factory=dict)  # what the config does not show (prompt hashes)
    versions: Mapping[str, str] = field(default_factory=dict)  # the environment (ragbench.identity.environment)
    git_commit: str = "unknown"
    status: str = "RUNNING"  # FINISHED, FAILED or KILLED once the job ended
    error: str | None = None
    dataset: str = ""
    variant: str = ""
    dataset_source: str = ""
    fingerprints: Mapping[str, str] = field(default_factory=dict)
    counts: Mapping[str, int] = field(default_factory=dict)
    timings: Mapping[str, float] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    curves: Mapping[str, Mapping[int, float]] = field(default_factory=dict)  # metric series over k
    tags: Mapping[str, str] = field(default_factory=dict)  # every ragbench tag of the run but the environment
    dataset_stats: Mapping[str, Any] = field(default_factory=dict)
    queries_by_type: Mapping[str, int] = field(default_factory=dict)
    files_read: tuple[str, ...] = ()
    format: str = RUN_FORMAT

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {', '.join(KINDS)}")

    def ended(self, status: str, error: str | None = None) -> RunRecord:
        return dataclasses.replace(self, status=status, error=error)

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["curves"] = {k: {str(x): y for x, y in v.items()} for k, v in self.curves.items()}
        return redact(json.dumps(data, indent=1, sort_keys=True, default=str, ensure_ascii=False)) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> RunRecord:
        """A ``run.json``; a ``RecordError`` (a ValueError) naming what is wrong when it is not a
        ``ragbench-run/2`` record: not UTF-8, not JSON or cut off, nested too deep (``ragbench.jsonio``), not
        an object, another format, a field missing or of another JSON type than this class declares, a
        metric or curve point that is not a number (``run_problem``)."""
        cut = not _text_of(text, RUN_FILE).rstrip().endswith("}")  # run.json ends with its object's brace
        data = _bounded(text, RUN_FILE, cut="is cut off (the file is truncated)" if cut else "")
        if not isinstance(data, dict):
            raise RecordError(f"{RUN_FILE} is {json_type(data)}, not a {RUN_FORMAT} record (a JSON object)")
        if data.get("format") != RUN_FORMAT:
            raise RecordError(f"{RUN_FILE} is not a {RUN_FORMAT} record (its format is {data.get('format')!r})")
        problem = run_problem(data)
        if problem:
            raise RecordError(f"{RUN_FILE}: {problem}")
        known = {f.name for f in dataclasses.fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        data["curves"] = {k: {int(x): float(y) for x, y in v.items()} for k, v in (data.get("curves") or {}).items()}
        data["files_read"] = tuple(data.get("files_read") or ())
        return cls(**data)


@dataclass(frozen=True)
class CaseRecord:
    """One case: the row shown in tables (question, answer, status, ids, scores, latency) and the fields
    that make its scores recomputable (``fields``: qrels, evidence, contexts, ...). ``row()`` is its line."""

    qid: str
    question_type: str
    answerable: bool
    question: str
    gold: str
    answer: str | None
    status: str
    error_type: str | None
    error: str | None
    retrieved_ids: list[str]
    retrieved_scores: list[float]
    context_ids: list[str]
    context_parts: list[list[str]]  # [] = the whole context chunk
    citations: list[int]  # the context numbers the answer cites
    prompt_tokens: int
    completion_tokens: int
    scores: Mapping[str, float]
    latency_ms: Mapping[str, float]
    fields: Mapping[str, Any]

    def table_row(self) -> dict[str, Any]:
        """The case as a table row: everything but the recomputation fields."""
        row = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name not in ("scores", "latency_ms", "fields")}
        row.update(sorted(self.scores.items()))
        row.update({f"latency/{k}_ms": v for k, v in self.latency_ms.items()})
        return row

    def row(self) -> dict[str, Any]:
        return {**self.table_row(), **self.fields}

    @property
    def version(self) -> int:
        """The line's ``record_version``; 0 for a line of the layout before it (a table row only)."""
        return int(self.fields.get("record_version") or 0)

    def recompute_problem(self) -> str | None:
        """What the line lacks for ``ragbench.verify`` to recompute its scores (``CASE_FIELDS``), else None."""
        missing = next((name for name in CASE_FIELDS if name not in self.fields), None)
        return None if missing is None else f"the case record has no {missing!r}"

    @classmethod
    def from_json(cls, line: str | bytes, *, where: str = CASES_ARTIFACT, cut: bool = False) -> CaseRecord:
        """One ``cases.jsonl`` line, read and checked by ``case_row``, as a record."""
        row = case_row(line, where=where, cut=cut)
        columns = _case_columns()
        scores: dict[str, float] = {}
        latency: dict[str, float] = {}
        fields: dict[str, Any] = {}
        for key, value in row.items():
            if key in columns:
                continue
            number = type(value) in (int, float)
            if key.startswith("latency/"):
                if number and key.endswith("_ms"):
                    latency[key[len("latency/"):-len("_ms")]] = value
                else:
                    fields[key] = value
            elif number and "/" in key:
                scores[key] = value
            else:
                fields[key] = value
        return cls(**{name: row[name] for name in columns}, scores=scores, latency_ms=latency, fields=fields)


def case_row(line: str | bytes, *, where: str = CASES_ARTIFACT, cut: bool = False) -> dict[str, Any]:
    """One ``cases.jsonl`` line as its row: the one reader of case lines (``CaseRecord.from_json`` builds
    the record from it; a reader that wants the row only, as ``ragbench.compare`` does, skips that: the
    row holds what ``CaseRecord.from_json(line).row()`` holds). JSON read with a bound on nesting
    (``ragbench.jsonio``); every column typed as ``CaseRecord`` declares it, every field of ``CASE_FIELDS``
    the line holds as that says; a line of an older layout migrated (``_migrated``). ``cut``: the line
    is the file's last and lacks its newline (a JSON error then says the file is truncated). A
    ``RecordError`` naming ``where`` (and the case) and what is wrong; the reader adds its fix."""
    row = _bounded(line, where, cut="is cut off mid-line (the file is truncated)" if cut else "")
    if not isinstance(row, dict):
        raise RecordError(f"{where} is {json_type(row)}, not a case record (a JSON object)")
    if not row:
        raise RecordError(f"{where} is an empty object {{}}, not a case record")
    case = f"{where} (case {row['qid']})" if isinstance(row.get("qid"), str) else where
    row = _migrated(row)
    for name, kinds in _case_columns().items():
        if name not in row:
            raise RecordError(f"{case}: the case record has no {name!r}")
        _check_type(case, name, row[name], kinds)
    for name, kind in CASE_FIELDS.items():
        if name in row:
            _check_type(case, name, row[name], (kind,))
            missing = [part for part in CASE_PARTS.get(name, ()) if part not in row[name]]
            if missing:
                raise RecordError(f"{case}: {name!r} has no {missing[0]!r}")
    return row


class RecordError(RagbenchError, ValueError):
    """A ``run.json`` or a case line that is not a record (cut off, not JSON, a field missing or mistyped):
    one line naming the file, the line and what is wrong; the reader adds its fix."""


# What a job's case line holds beyond the columns ``CaseRecord`` declares, for ``ragbench.verify`` to
# recompute its scores (``_recomputable`` writes them), each with its JSON type; the parts of two of them.
CASE_FIELDS: dict[str, type] = {
    "record_version": int, "answers": list, "doc_ids": list, "query_meta": dict, "dataset": str, "topk": int,
    "ranked_ids": list, "hit_units": list, "qrels": dict, "evidence": dict, "contexts": list,
}
CASE_PARTS = {"evidence": ("matched", "texts", "openviking"), "qrels": ("chunk", "unit")}
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number",
               bool: "true/false", type(None): "null"}


def json_type(value: Any) -> str:
    """What a parsed JSON value is, in words (``an array``, ``true/false``)."""
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _json_kinds(hint: Any) -> tuple[type, ...]:
    """The JSON types (as ``json.loads`` makes them) a value of a declared field may have."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return tuple(k for arg in typing.get_args(hint) for k in _json_kinds(arg))
    if hint is Any:
        return (object,)
    if origin is not None:
        return (dict,) if issubclass(origin, Mapping) else (list,)
    return (hint,)


def _fits(value: Any, kinds: tuple[type, ...]) -> bool:
    """``value`` is one of ``kinds`` (exact JSON types: true is not a number; a whole number is a float)."""
    return object in kinds or type(value) in kinds or (float in kinds and type(value) is int)


def _check_type(case: str, name: str, value: Any, kinds: tuple[type, ...]) -> None:
    if not _fits(value, kinds):
        want = " or ".join(dict.fromkeys(_JSON_TYPES.get(k, k.__name__) for k in kinds))
        raise RecordError(f"{case}: {name!r} is {json_type(value)}, expected {want}")


_TABLE_ONLY = ("scores", "latency_ms", "fields")  # CaseRecord's fields that are not one column of the line


@functools.cache
def _case_columns() -> dict[str, tuple[type, ...]]:
    """A case line's columns with their JSON types, as ``CaseRecord`` declares them."""
    hints = typing.get_type_hints(CaseRecord)
    return {f.name: _json_kinds(hints[f.name]) for f in dataclasses.fields(CaseRecord) if f.name not in _TABLE_ONLY}


def run_problem(data: Mapping[str, Any]) -> str | None:
    """What is wrong with a parsed ``run.json`` object, else None: a field ``RunRecord`` requires missing,
    a field of another JSON type than it declares, a metric or a curve point that is not a number."""
    hints = typing.get_type_hints(RunRecord)
    for f in dataclasses.fields(RunRecord):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                return f"the record has no {f.name!r}"
            continue
        kinds = _json_kinds(hints[f.name])
        if not _fits(data[f.name], kinds):
            want = " or ".join(dict.fromkeys(_JSON_TYPES.get(k, k.__name__) for k in kinds))
            return f"{f.name!r} is {json_type(data[f.name])}, expected {want}"
    number = (float,)
    for name, value in (data.get("metrics") or {}).items():
        if not _fits(value, number):
            return f"metric {name!r} is {json_type(value)}, expected a number"
    for name, series in (data.get("curves") or {}).items():
        if not isinstance(series, dict) or not all(_fits(v, number) and k.lstrip("-").isdigit()
                                                   for k, v in series.items()):
            return f"curve {name!r} is not an object of numbers by step"
    return None


def _text_of(data: str | bytes, where: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"{where} is not UTF-8 (byte 0x{data[exc.start]:02x} at column {exc.start + 1})") from None


def _bounded(data: str | bytes, where: str, *, cut: str) -> Any:
    """``data`` parsed (``loads_bounded``); a RecordError naming ``where`` when it is not UTF-8, nested too
    deep or not JSON (said as ``cut`` when that is given: the file is truncated)."""
    text = _text_of(data, where)
    try:
        return loads_bounded(text, where=where)
    except NestedTooDeep as exc:
        raise RecordError(f"{where} is {exc.msg} at column {exc.colno}") from None
    except json.JSONDecodeError as exc:
        what = cut or "is not JSON"
        raise RecordError(f"{where} {what}: {exc.msg} at line {exc.lineno} column {exc.colno}"
                          if exc.lineno > 1 else f"{where} {what}: {exc.msg} at column {exc.colno}") from None


def _migrated(row: dict[str, Any]) -> dict[str, Any]:
    """A case line of an older layout in this one's terms. Lines written before ``record_version`` (a table
    row only: no recomputation fields; before the expander's parts, no ``context_parts``) read as they are,
    their missing column filled: each context the whole chunk."""
    if "context_parts" not in row and "record_version" not in row and isinstance(row.get("context_ids"), list):
        return {**row, "context_parts": [[] for _ in row["context_ids"]]}
    return row


def case_record(case: CaseResult, tree: ChunkTree, emap: EvidenceMap | None, *, dataset: str, topk: int,
                coverage: Coverage | None = None) -> CaseRecord:
    """The record of one case; ``coverage``: the query's ``Coverage`` on ``tree`` when the job kept one."""
    answer, query = case.answer, case.query
    return CaseRecord(
        qid=query.qid, question_type=query.question_type, answerable=query.answerable, question=query.text,
        gold=" | ".join(query.answers), answer=answer.text if answer else None, status=case.status,
        error_type=case.error_type, error=case.error,
        retrieved_ids=[h.chunk_id for h in case.hits[:topk]],
        retrieved_scores=[round(h.score, 6) for h in case.hits[:topk]],
        context_ids=[c.chunk_id for c in case.contexts], context_parts=[list(c.part_ids) for c in case.contexts],
        citations=list(answer.citations) if answer else [],
        prompt_tokens=answer.usage.prompt_tokens if answer else 0,
        completion_tokens=answer.usage.completion_tokens if answer else 0,
        scores=dict(case.scores), latency_ms={k: round(v * 1000, 3) for k, v in case.latency.items()},
        fields=_recomputable(case, tree, emap, dataset=dataset, topk=topk, coverage=coverage))


def _plain(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-plain part of a query's meta: scalars, and lists of strings (the custom format's ``tags``)."""
    return {str(k): list(v) if isinstance(v, (list, tuple)) else v for k, v in meta.items()
            if isinstance(v, (str, int, float, bool)) or v is None
            or (isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v))}


def _recomputable(case: CaseResult, tree: ChunkTree, emap: EvidenceMap | None, *, dataset: str, topk: int,
                  coverage: Coverage | None) -> dict[str, Any]:
    emap = emap or EMPTY_MAP
    ranked = list(case.hits[: max(metric_ks(topk))])
    matched = bool(emap.matched)
    query = case.query
    cov = coverage if coverage is not None and coverage.emap is emap else Coverage(tree, emap)
    return {
        "record_version": RECORD_VERSION,
        "dataset": dataset,
        "topk": topk,
        "answers": list(query.answers),
        "query_meta": _plain(query.meta),
        "doc_ids": list(query.doc_ids),
        "ranked_ids": [h.chunk_id for h in ranked],
        "ranked_doc_ids": [tree[h.chunk_id].doc_id for h in ranked],
        "hit_units": hit_units(tree, emap, ranked, cov),
        "qrels": {"chunk": cov.chunk_qrels() if matched else {}, "unit": cov.unit_qrels()},
        "evidence": {"matched": matched, "texts": list(emap.texts), "how": list(emap.how),
                     "openviking": openviking_evidence(query)},
        "topk_texts": [tree[h.chunk_id].text for h in ranked[:topk]],
        "contexts": [{"chunk_id": c.chunk_id, "title": c.title, "text": c.text, "parts": list(c.part_ids),
                      "refs": context_refs(tree, c), "has_evidence": context_has_evidence(tree, emap, c, cov)}
                     for c in case.contexts],
        "judge_notes": {name: dict(notes) for name, notes in case.judge_notes.items()},
        **document_record(case.scores, query, emap, tree),  # doc_qrels, doc_ignore: retrieval/doc/* cases
        # a conversation's turn: its conversation id and turn index (compare pairs on <conversation>#<turn>)
        **({"conversation": query.conversation, "turn": query.turn, "history_turns": len(query.history)}
           if query.conversation is not None else {}),
        # trace=true: candidates and scores per stage, gold_entered / gold_lost; rerank_fallback when any
        **({"trace": dict(case.trace)} if case.trace else {}),
        # dataset.postprocess: the answer before it (the case's answer is the processed one); cited sentences
        **({"answer_raw": case.answer.raw_text} if case.answer and case.answer.raw_text is not None else {}),
        **({"cited": [[t, list(ns)] for t, ns in case.answer.cited]} if case.answer and case.answer.cited else {}),
        # repeats=N: every repeat's answer and answer scores; the case's scores are their reduced values
        **({"repeats": {"reducer": case.reducer, "runs": [dict(r) for r in case.repeats]}} if case.repeats else {}),
    }


def case_line(record: CaseRecord) -> str:
    """A case's ``cases.jsonl`` line, secrets masked."""
    return redact(json.dumps(record.row(), sort_keys=True, default=str, ensure_ascii=False)) + "\n"


class RecordWriter:
    """Writes one job's record into ``folder``: ``run.json`` (RUNNING at once, its end state at ``finish``)
    and ``cases.jsonl``, a line per case as it finishes (flushed, so a killed job keeps its cases).
    ``table`` keeps each case's table row for the sinks that show a table."""

    def __init__(self, folder: Path, record: RunRecord) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.record = record
        self.table: list[dict[str, Any]] = []
        (folder / STORED_FILE).unlink(missing_ok=True)  # a pointer left by an earlier job in this folder
        self._write_run(record)
        self._cases: IO[str] | None = open(folder / CASES_ARTIFACT, "w", encoding="utf-8")  # noqa: SIM115 - open across calls

    def case(self, record: CaseRecord) -> None:
        assert self._cases is not None, "the record is finished"
        self._cases.write(case_line(record))
        self._cases.flush()
        self.table.append(record.table_row())

    def finish(self, record: RunRecord) -> None:
        """Closes ``cases.jsonl`` and writes ``run.json`` with the job's end (replacing the RUNNING one whole)."""
        if self._cases is not None:
            self._cases.close()
            self._cases = None
        self.record = record
        self._write_run(record)

    def _write_run(self, record: RunRecord) -> None:
        tmp = self.folder / f".{RUN_FILE}.tmp"
        tmp.write_text(record.to_json(), encoding="utf-8")
        os.replace(tmp, self.folder / RUN_FILE)


def begun(name: str, config: Mapping[str, Any], identity: Callable[[Mapping[str, Any]], str], *,
          kind: str = "job") -> RunRecord:
    """A starting run's record: its resolved ``config``, its ``identity(config)`` (``ragbench.identity``), the
    environment (python, os, ragbench and the libraries' versions: the one list the ``ragbench.env.*`` tags
    show) and the commit ragbench runs from."""
    return RunRecord(name=name, job_hash=identity(config), config=config, kind=kind,
                     git_commit=run_identity.git_commit(), versions=run_identity.environment())


def finished(record: RunRecord, result: JobResult, *, topk: int, extra_tags: Mapping[str, str]) -> RunRecord:
    """``record`` with a finished pipeline's results: fingerprints, counts, timings, every logged metric and
    curve, the results' tags (added to those the run started with), and the dataset's facts (its status
    is set by the job's end)."""
    ev = result.evalset
    tags = {
        "ragbench.dataset_sha256": result.fingerprints["dataset_sha256"],
        "ragbench.index_sha256": result.fingerprints["index_sha256"],
        "ragbench.dataset": ev.name,
        "ragbench.dataset_variant": ev.variant,
        "ragbench.version": __version__,
        "ragbench.git_commit": record.git_commit,  # with +dirty; mlflow.source.git.commit has the bare sha
        **{f"ragbench.dataset.{k}": v for k, v in ev.tags.items()},
        **gold_path_tags(c.trace for c in result.cases),  # trace=true: where gold first entered / was lost
        **extra_tags,
    }
    return dataclasses.replace(
        record, tags={**record.tags, **tags}, dataset=ev.name, variant=ev.variant, dataset_source=str(ev.root or ev.name),
        fingerprints=dict(result.fingerprints), counts=dict(result.counts), timings=dict(result.timings),
        metrics=job_metrics(result, topk), curves=at_k_views(result.metrics, topk)[1],
        dataset_stats=dict(ev.stats), queries_by_type=dict(queries_by_type(ev)), files_read=tuple(ev.files))


ERROR_TAG = "ragbench.error"  # what failed a job (or its objective), as a tag


def failed(record: RunRecord, error: str, zeros: Mapping[str, float]) -> RunRecord:
    """``record`` of a job that failed: ``error`` as its ``ragbench.error`` tag, and ``zeros`` (the answer
    scores of a job that failed before it had results: ``ragbench.outcome.zero_scores``) in its metrics."""
    return dataclasses.replace(record, tags={**record.tags, ERROR_TAG: error}, metrics={**zeros, **record.metrics})


ITEM_KEYS = ("qid", "question_type", "status", "generator")  # a calibration row's keys that are not numbers


def item_record(item: LabelledItem, row: Mapping[str, Any]) -> CaseRecord:
    """A labelled item's line in a calibration's record: the item (question, answer, gold, its passages'
    ids, the model that wrote the answer) and, as its scores, ``row``'s numbers (``Calibration.rows``): the
    human labels, the judge's score and verdict, the agreement and each probe's values for the item, from
    which ``ragbench.verify_calibration`` recomputes every metric of the run."""
    contexts = item.context_objects()
    return CaseRecord(
        qid=item.item_id, question_type=item.question_type, answerable=item.answerable, question=item.question,
        gold=" | ".join(item.gold), answer=item.answer, status=str(row["status"]), error_type=None, error=None,
        retrieved_ids=[], retrieved_scores=[], context_ids=[c.chunk_id for c in contexts],
        context_parts=[[] for _ in contexts], citations=[], prompt_tokens=0, completion_tokens=0,
        scores={k: v for k, v in row.items() if k not in ITEM_KEYS}, latency_ms={},
        fields={"record_version": RECORD_VERSION, "generator": item.generator})


def calibrated(record: RunRecord, labels: LabelSet, cal: Calibration) -> RunRecord:
    """``record`` with a calibration's results: its labels file as the dataset, the counts and every metric
    (its status is set by the run's end)."""
    by_type: dict[str, int] = {}
    for item in labels.items:
        by_type[item.question_type] = by_type.get(item.question_type, 0) + 1
    failed = sum(row.get("status") != "ok" for row in cal.rows)
    return dataclasses.replace(
        record, dataset=labels.name, variant="labels", dataset_source=labels.path,
        fingerprints={"dataset_sha256": labels.sha256}, counts={"queries": len(labels.items), "failed": failed},
        metrics=cal.metrics(), queries_by_type=by_type, files_read=(labels.path,))


LEGACY_SCORES = "case_scores.json"  # before the record: a run's compact per-case scores (ragbench.compare)


def legacy_rows(doc: Any) -> list[dict[str, Any]] | None:
    """The case lines of a run logged before the record whose only per-case file is its ``case_scores.json``
    (a calibration run): one row per case with its id, type, status and every number of its line; None when
    ``doc`` is not such a document (a column that does not hold one value per case)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("qid"), list) or not isinstance(doc.get("fields"), dict):
        return None
    n = len(doc["qid"])
    columns = {"question_type": doc.get("question_type"), "status": doc.get("status"), **doc["fields"]}
    if not all(isinstance(c, list) and len(c) == n for c in columns.values()):
        return None
    return [{"qid": doc["qid"][i], **{k: c[i] for k, c in columns.items() if c[i] is not None}} for i in range(n)]


def stored_cases(files: Mapping[str, bytes | None]) -> tuple[str, list[dict[str, Any]]]:
    """A run's case lines from its stored files, whatever its layout: its ``cases.jsonl`` (each line read by
    ``CaseRecord.from_json``), or, for a calibration run logged before the record, its ``case_scores.json``
    migrated to lines (``legacy_rows``). Returns (the file read, its rows); a ``RecordError`` naming the file
    and what is wrong (absent, not UTF-8, a line not a case record, not a case-scores document)."""
    data = files.get(CASES_ARTIFACT)
    if data is not None:
        lines = _text_of(data, CASES_ARTIFACT).split("\n")
        return CASES_ARTIFACT, [
            CaseRecord.from_json(line, where=f"{CASES_ARTIFACT} line {n}", cut=n == len(lines)).row()
            for n, line in enumerate(lines, start=1) if line.strip()]
    legacy = files.get(LEGACY_SCORES)
    if legacy is None:
        raise RecordError(f"neither {CASES_ARTIFACT} nor {LEGACY_SCORES} is among the run's artifacts")
    migrated = legacy_rows(_bounded(legacy, LEGACY_SCORES, cut=""))
    if migrated is None:
        raise RecordError(f"{LEGACY_SCORES} is not a case-scores document with one value per case")
    return LEGACY_SCORES, migrated


# Where a record's bytes live. The job writes run.json and cases.jsonl into its output folder as it goes
# (a killed job keeps them there); once the sink has them in the run's artifact store (the shared copy:
# the MLflow UI, compare and verify from any machine), the folder keeps only STORED_FILE, a pointer to
# them (docs/layout.md, "A job's life"). ``folder_files`` reads a folder of either layout.
STORED_FILE = "stored.json"
STORED_FORMAT = "ragbench-stored/1"
RECORD_FILES = (RUN_FILE, CASES_ARTIFACT)


@dataclass(frozen=True)
class StoredRecord:
    """The pointer an output folder keeps to its record's files in the artifact store: the run that holds
    them, its store (credentials stripped) and artifact folder, and each file's size and sha256 as the job
    wrote it (what a reader checks the downloaded bytes against)."""

    run_id: str
    tracking_uri: str
    artifact_uri: str
    files: Mapping[str, Mapping[str, Any]]  # name -> {"bytes": size, "sha256": hex digest}
    format: str = STORED_FORMAT

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, data: str | bytes, *, where: str = STORED_FILE) -> StoredRecord:
        """A ``stored.json``; a RecordError naming ``where`` and what is wrong when it is not one."""
        doc = _bounded(data, where, cut="")
        if not isinstance(doc, dict) or doc.get("format") != STORED_FORMAT:
            raise RecordError(f"{where} is not a {STORED_FORMAT} pointer")
        files = doc.get("files")
        if not (isinstance(files, dict) and all(isinstance(f, dict) and isinstance(f.get("sha256"), str)
                                                and type(f.get("bytes")) is int for f in files.values())
                and all(isinstance(doc.get(k), str) and doc[k] for k in ("run_id", "tracking_uri"))):
            raise RecordError(f"{where}: a {STORED_FORMAT} pointer needs run_id, tracking_uri and each "
                              "file's bytes and sha256")
        return cls(run_id=doc["run_id"], tracking_uri=doc["tracking_uri"],
                   artifact_uri=str(doc.get("artifact_uri") or ""), files=files)


def file_facts(folder: Path) -> dict[str, dict[str, Any]]:
    """Size and sha256 of each record file in ``folder`` (``RECORD_FILES`` that are there)."""
    out: dict[str, dict[str, Any]] = {}
    for name in RECORD_FILES:
        path = folder / name
        if path.is_file():
            data = path.read_bytes()
            out[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return out


def keep_pointer(folder: Path, pointer: StoredRecord) -> int:
    """Replaces the record's files in ``folder`` by ``pointer`` (``stored.json``), once the artifact store
    holds them: the pointer is written whole first, then each file it names is removed (a folder left with
    both by a crash between reads as its files). Returns the bytes freed."""
    tmp = folder / f".{STORED_FILE}.tmp"
    tmp.write_text(pointer.to_json(), encoding="utf-8")
    os.replace(tmp, folder / STORED_FILE)
    freed = 0
    for name in pointer.files:
        path = folder / name
        if path.is_file():
            freed += path.stat().st_size
            path.unlink()
    return freed


def folder_files(folder: Path, fetch: Callable[[StoredRecord, str], bytes]) -> dict[str, bytes]:
    """A job's output folder's record files (``run.json``, ``cases.jsonl``) as bytes, whatever its layout:
    the files themselves when the folder holds them (a record not logged, a job killed before its end, or a
    run from before the pointer, whose folder kept a second copy); else, through its ``stored.json``,
    ``fetch(pointer, name)`` from the artifact store, each checked against the size and sha256 the job
    wrote. The one reader of an output folder's record: a RecordError naming the folder and what is
    missing or differs."""
    if (folder / RUN_FILE).is_file():
        return {name: (folder / name).read_bytes() for name in RECORD_FILES if (folder / name).is_file()}
    where = folder / STORED_FILE
    if not where.is_file():
        raise RecordError(f"{folder}: no {RUN_FILE} and no {STORED_FILE}; not a job's record folder")
    pointer = StoredRecord.from_json(where.read_bytes(), where=str(where))
    out: dict[str, bytes] = {}
    for name, facts in pointer.files.items():
        data = fetch(pointer, name)
        if len(data) != facts["bytes"] or hashlib.sha256(data).hexdigest() != facts["sha256"]:
            raise RecordError(f"{name} of run {pointer.run_id} in {pointer.tracking_uri} is not the file the "
                              f"job wrote ({len(data)} bytes, {facts['bytes']} written; sha256 differs)")
        out[name] = data
    return out
