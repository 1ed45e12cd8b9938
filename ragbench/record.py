"""A job's record: one typed, versioned ``RunRecord`` (``run.json``) and its ``CaseRecord`` lines
(``cases.jsonl``), written by one writer into the job's output folder as the job goes.

The record is the source; MLflow is one sink of it (``ragbench.tracking.mlflow_sink``), and ``compare``,
``verify`` and the reports read it. ``RecordWriter`` appends each case when it finishes, so a job that is
interrupted or killed keeps the cases it did in ``<job output dir>/record/cases.jsonl``; ``run.json`` says
``RUNNING`` until the job ends, then holds its status and results.

Layouts: ``ragbench-run/2`` (this one: ``run.json`` beside ``cases.jsonl``); runs logged before it have
``cases.jsonl`` (same lines) with ``case_scores.json`` and ``summary.json`` and no ``run.json``: their
record is read from the MLflow run itself (``ragbench.compare.select``).

A case line holds everything ``ragbench.verify`` needs to recompute its retrieval, context and answer
scores without the corpus, the index or any model: the ranked chunk ids down to the deepest cut-off any
metric uses, with each hit's document and the evidence units it covers; the qrels at chunk and
evidence-unit level; the evidence strings; the texts of the top-k hits; every context the generator read;
the gold answers and the query facts the answer metrics read; per model judge, its notes.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ragbench.evidence import Coverage, EvidenceMap, context_has_evidence, hit_units
from ragbench.judge.context import context_refs, openviking_evidence
from ragbench.judge.document import record_fields as document_record
from ragbench.judge.retrieval import metric_ks
from ragbench.redact import redact
from ragbench.types import CaseResult, ChunkTree

if TYPE_CHECKING:
    from ragbench.components import JobResult

RUN_FORMAT = "ragbench-run/2"
RECORD_VERSION = 1  # a case line's layout (unchanged since the first record)
RUN_FILE = "run.json"
CASES_ARTIFACT = "cases.jsonl"
REUSED_FROM = "ragbench.reused_from"  # a resumed job's copy names the run that ran it (ragbench.job)
EMPTY_MAP = EvidenceMap(anchors=(), relevance=(), texts=(), how=())


def cases_run_id(run: Any) -> str:
    """The MLflow run whose artifacts hold ``run``'s record: the run itself, or for a copy that resume put
    in a later sweep (params, metrics and tags only) the run that ran the job."""
    return str(run.data.tags.get(REUSED_FROM) or run.info.run_id)


@dataclass(frozen=True)
class RunRecord:
    """One job: what it was (config, component params, versions, commit, identity), what it read
    (fingerprints, dataset facts) and how it ended (status, error, results)."""

    name: str
    job_hash: str
    config: Mapping[str, Any]  # the resolved config
    params: Mapping[str, Any] = field(default_factory=dict)  # what the config does not show (prompt hashes)
    versions: Mapping[str, str] = field(default_factory=dict)  # ragbench and the libraries that shape results
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
    tags: Mapping[str, str] = field(default_factory=dict)
    dataset_stats: Mapping[str, Any] = field(default_factory=dict)
    queries_by_type: Mapping[str, int] = field(default_factory=dict)
    files_read: tuple[str, ...] = ()
    format: str = RUN_FORMAT

    def ended(self, status: str, error: str | None = None) -> RunRecord:
        return dataclasses.replace(self, status=status, error=error)

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["curves"] = {k: {str(x): y for x, y in v.items()} for k, v in self.curves.items()}
        return redact(json.dumps(data, indent=1, sort_keys=True, default=str, ensure_ascii=False)) + "\n"

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        """A ``run.json``; ValueError naming what is wrong when it is not a ``ragbench-run/2`` record."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != RUN_FORMAT:
            raise ValueError(f"not a {RUN_FORMAT} record")
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
    return {str(k): v for k, v in meta.items() if isinstance(v, (str, int, float, bool)) or v is None}


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
        # trace=true: candidates and scores per stage, gold_entered / gold_lost; rerank_fallback when any
        **({"trace": dict(case.trace)} if case.trace else {}),
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


def begun(name: str, config: Mapping[str, Any], identity: Callable[[Mapping[str, Any]], str]) -> RunRecord:
    """A starting job's record: its resolved ``config``, its ``identity(config)`` (``ragbench.identity``), the
    versions of ragbench and of the libraries that shape results, and the commit ragbench runs from."""
    from ragbench import __version__
    from ragbench.cache.entries import library_versions
    from ragbench.identity import git_commit

    return RunRecord(name=name, job_hash=identity(config), config=config, git_commit=git_commit(),
                     versions={"ragbench": __version__, **library_versions()})


def finished(record: RunRecord, result: JobResult, *, topk: int, extra_tags: Mapping[str, str]) -> RunRecord:
    """``record`` with a finished pipeline's results: fingerprints, counts, timings, every logged metric and
    curve, the run tags, and the dataset's facts (its status is set by the job's end)."""
    from ragbench import __version__
    from ragbench.job_metrics import at_k_views, job_metrics, queries_by_type
    from ragbench.trace import gold_path_tags

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
        record, dataset=ev.name, variant=ev.variant, dataset_source=str(ev.root or ev.name),
        fingerprints=dict(result.fingerprints), counts=dict(result.counts), timings=dict(result.timings),
        metrics=job_metrics(result, topk), curves=at_k_views(result.metrics, topk)[1], tags=tags,
        dataset_stats=dict(ev.stats), queries_by_type=dict(queries_by_type(ev)), files_read=tuple(ev.files))
