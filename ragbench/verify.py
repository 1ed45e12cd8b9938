"""``python -m ragbench.verify RUN_ID``: recompute a run's retrieval, context and answer metrics from its
own artifacts (``cases.jsonl``) and compare them with what the run logged, and check that the compact
``case_scores.json`` of a run logged before the record (``ragbench.record``) holds the numbers of ``cases.jsonl``.

Per case it recomputes, from the case record alone, every retrieval metric (ranked ids + qrels + the
evidence units each hit covers), the context metrics (context texts + their dataset ids), the lexical
answer metrics (answer + gold answers), ``judge=semantic``'s scores (its models rebuilt from the record's
config) and the citation hit rate; LLM-judge scores cannot be recomputed without the model, so they are taken
as logged. Then it aggregates the cases exactly as the job did
(``ragbench.judge.aggregate``) and compares every resulting metric with the logged run metric: the
record's (``run.json``), and MLflow's, its sink; the record's status and config are checked against
MLflow's status and params (``check_sink``). A ``run.json`` that is not a record (cut off, ``[]``, a
metric that is not a number) is one line, exit 1. Case lines are read by ``CaseRecord.from_json``.
Exit 0 when everything matches to 1e-9, 1 when anything differs or cannot be checked, 2 on a usage
error (unknown run, no store, no case record). A ``ragbench.judge calibrate`` run is checked by
``ragbench.verify_calibration`` (its agreement and probes, from its items).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragbench.compare.runcases import SCORES_ARTIFACT, scores_document
from ragbench.errors import ConfigError
from ragbench.job_metrics import at_k_views
from ragbench.jsonio import loads_bounded
from ragbench.judge.aggregate import aggregate
from ragbench.judge.citations import citation_scores, raw_scores
from ragbench.judge.context import context_scores
from ragbench.judge.document import scores_from_record as document_scores_from_record
from ragbench.judge.hops import scores_from_record as hop_scores_from_record
from ragbench.judge.lexical import answer_scores
from ragbench.judge.retrieval import doc_recall_scores, metric_ks, scores_from_record
from ragbench.judge.scorers import build_scorers, scorer_nodes, scorer_scores
from ragbench.judge.semantic import KEYS as SEMANTIC_KEYS
from ragbench.judge.semantic import SemanticJudge, case_scores, semantic_judges
from ragbench.protocols import RetrievalScorer
from ragbench.record import CASES_ARTIFACT, RUN_FILE, CaseRecord, RecordError, RunRecord, cases_run_id
from ragbench.repeats import record_runs, reduce_scores, repeat_metrics
from ragbench.tracking import reach
from ragbench.tracking.mlflow_sink import start_params
from ragbench.tracking.mlflow_tracker import mlflow_name
from ragbench.tracking.mlflow_tracker import redact as param_values
from ragbench.tracking.store import sqlite_path, tracking_defaults
from ragbench.types import Answer, CaseResult, Hit, Query, Usage
from ragbench.verify_calibration import check_calibration, load_calibration

TOLERANCE = 1e-9
FAMILIES = ("retrieval/", "context/", "answer/", "judge/", "cases/", "by_type/", "by_difficulty/", "headline/",
            "by_tag/", "by_turn/", "by_followup/", "conversation/", "repeats/")
GROUPS = ("by_type/", "by_difficulty/", "by_tag/", "by_turn/", "by_followup/")  # aggregate's per-group copies
RECOMPUTED = ("retrieval/", "context/", "answer/em", "answer/f1", "answer/contains", "answer/refused", "answer/locomo_f1",
              "answer/citation_hit_rate", "answer/citation_support_rate", "answer/citation_missing", "answer/raw_",
              *SEMANTIC_KEYS)  # semantic: the run's judge=semantic, rebuilt
NOT_AGGREGATED = ("latency/", "tokens/", "cost/", "llm/")  # timings and usage: not quality metrics


class UsageError(Exception):
    """A bad run id, store or artifact: exit code 2."""


@dataclass
class Report:
    """What verify compared: every (key, logged, recomputed) and what it could not check."""

    compared: int = 0
    worst: tuple[float, str] = (0.0, "")
    mismatches: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    sink_checked: set[str] = field(default_factory=set)  # run metrics compared three ways (run.json, MLflow)

    def check(self, where: str, logged: float, recomputed: float, sink: float | None = None) -> None:
        """``logged`` (the record's value) against ``recomputed``; with ``sink``, MLflow's value, one line
        naming the file when the record and MLflow disagree."""
        self.compared += 1
        diff = difference(logged, recomputed)
        if diff > self.worst[0] or not self.worst[1]:
            self.worst = (diff, where)
        if sink is not None and difference(logged, sink) > TOLERANCE:
            self.mismatches.append(f"{where}: {RUN_FILE} {logged:.10g}, MLflow {sink:.10g}, "
                                   f"recomputed {recomputed:.10g}")
        elif diff > TOLERANCE:
            self.mismatches.append(f"{where}: logged {logged!r}, recomputed {recomputed!r}")

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.unchecked and self.compared > 0


def difference(a: float, b: float) -> float:
    """|a - b|; 0 when both are NaN, infinite when one is."""
    diff = abs(float(a) - float(b))
    if diff != diff:  # NaN on one side only
        diff = 0.0 if (a != a and b != b) else float("inf")
    return diff


def score_keys(row: Mapping[str, Any]) -> dict[str, float]:
    """The per-case scores of a row (its ``family/name`` keys other than latencies)."""
    return {k: float(v) for k, v in row.items()
            if "/" in k and not k.startswith("latency/") and isinstance(v, (int, float)) and not isinstance(v, bool)}


def recompute_case(row: Mapping[str, Any], scorers: Sequence[RetrievalScorer] = ()) -> dict[str, float]:
    """A case's retrieval, context and lexical answer scores, from its record alone; ``scorers``: the run's
    ``metrics.retrieval`` (``RetrievalScorer``), applied to the recorded ranking and qrels."""
    out: dict[str, float] = {}
    ev = row["evidence"]
    if ev["matched"]:
        ks = metric_ks(int(row["topk"]))
        out.update(scores_from_record(row["ranked_ids"], row["hit_units"], row["qrels"]["chunk"],
                                      row["qrels"]["unit"], ks, [t for t in ev["texts"] if t], row["topk_texts"]))
        # the adapter's doc_recall declaration decided at run time whether the case has them (the record keeps
        # no adapter): recomputed wherever the case logged them
        if any(k.startswith("retrieval/doc_recall_at_") for k in row):
            out.update(doc_recall_scores(row["ranked_doc_ids"], row["doc_ids"], ks))
        out.update(scorer_scores(scorers, ranked=row["ranked_ids"], covered=row["hit_units"],
                                 qrels=row["qrels"]["unit"], chunk_qrels=row["qrels"]["chunk"], ks=ks))
        out.update(document_scores_from_record(row))
    out.update(hop_scores_from_record(row))  # multi-step cases: per-hop scores from trace.hops
    contexts = row["contexts"]
    if contexts or "context/tokens" in row:
        out.update(context_scores([c["text"] for c in contexts], [c["refs"] for c in contexts], ev["texts"],
                                  ev["openviking"], ev["matched"]))
    repeated = record_runs(row) if row.get("status", "ok") == "ok" else None
    if repeated is not None:  # repeats=N: each repeat's answer scores, reduced as the job reduced them
        reducer, runs = repeated
        out.update(reduce_scores([answer_part(row, r["answer"], r.get("citations"), r) for r in runs
                                  if r.get("answer") is not None], reducer))
    elif row.get("answer") is not None:
        out.update(answer_part(row, row["answer"], row.get("citations"), row))
    return out


def answer_part(row: Mapping[str, Any], answer: str, citations: Sequence[int] | None,
                given: Mapping[str, Any] | None = None) -> dict[str, float]:
    """The lexical answer scores and the citation hit rate of ``answer`` (the case's, or one repeat's); with
    ``given`` (the case row or the repeat's entry), its citation support and missing citation
    (``cited``) and, under dataset.postprocess, the unprocessed answer's ``answer/raw_*`` (``answer_raw``)."""
    out = dict(answer_scores(answer, row["answers"], dataset=row["dataset"], meta=row["query_meta"]))
    contexts = row["contexts"]
    cited = [n for n in citations or [] if 1 <= n <= len(contexts)]
    if cited and row["evidence"]["matched"]:
        out["answer/citation_hit_rate"] = sum(bool(contexts[n - 1]["has_evidence"]) for n in cited) / len(cited)
    if given is not None:
        out.update(citation_scores([(t, ns) for t, ns in given.get("cited") or []], citations or [],
                                   [c["text"] for c in contexts], row["query_meta"]))
        if given.get("answer_raw") is not None:
            out.update(raw_scores(given["answer_raw"], row["answers"], dataset=row["dataset"], meta=row["query_meta"]))
    return out


def check_repeats(row: Mapping[str, Any], report: Report) -> list[dict[str, float]] | None:
    """A repeated case's every repeat: its recorded answer scores against those recomputed from its answer;
    the repeats' recorded scores (None: the case has no repeats)."""
    repeated = record_runs(row)
    if repeated is None:
        return None
    runs = repeated[1]
    for i, run in enumerate(runs):
        logged = {k: float(v) for k, v in (run.get("scores") or {}).items()}
        fresh = answer_part(row, run["answer"], run.get("citations"), run) if run.get("answer") is not None else {}
        for key in sorted(set(logged) & set(fresh)):
            if key.startswith(RECOMPUTED):
                report.check(f"case {row['qid']} repeat {i} {key}", logged[key], fresh[key])
    return [dict(run.get("scores") or {}) for run in runs]


def case_result(row: Mapping[str, Any], scores: Mapping[str, float]) -> CaseResult:
    """A CaseResult carrying what ``aggregate`` reads, rebuilt from a row."""
    query = Query(qid=row["qid"], text=row["question"], answers=tuple(row["answers"]),
                  question_type=row["question_type"], answerable=bool(row["answerable"]),
                  doc_ids=tuple(row["doc_ids"]), meta=row["query_meta"],
                  conversation=row.get("conversation"), turn=int(row.get("turn") or 0))  # a conversation's turn
    answer = None
    if row.get("answer") is not None:
        answer = Answer(text=row["answer"], model="", usage=Usage(prompt_tokens=int(row.get("prompt_tokens") or 0),
                                                                  completion_tokens=int(row.get("completion_tokens") or 0)))
    latency = {k[len("latency/"):-len("_ms")]: float(v) / 1000.0 for k, v in row.items()
               if k.startswith("latency/") and k.endswith("_ms")}
    return CaseResult(query=query, hits=tuple(Hit(cid, 0.0, i + 1) for i, cid in enumerate(row["ranked_ids"])),
                      contexts=(), answer=answer, scores=dict(scores), status=row["status"],
                      error_type=row.get("error_type"), error=row.get("error"), latency=latency)


def verify_rows(rows: Sequence[Mapping[str, Any]], logged: Mapping[str, float], topk: int | None = None,
                scorers: Sequence[RetrievalScorer] = (), sink: Mapping[str, float] | None = None,
                semantic: Sequence[SemanticJudge] = ()) -> Report:
    """Compares every recomputable per-case score and every aggregated metric with ``logged`` (the record's
    metrics, by MLflow name; MLflow's for a run logged before the record); with the job's ``topk``, also the
    fixed-name views the job derives from them (``*_at_topk``, ``headline/*``, the last point of each
    ``*_at_k_curve``); ``scorers``: the run's ``metrics.retrieval``; ``sink``: MLflow's metrics of a run
    with a record, each aggregated metric compared with both."""
    report = Report()
    cases = []
    repeated: list[list[dict[str, float]]] = []  # repeats=N: each ok case's repeats' scores
    for row in rows:
        if "record_version" not in row:
            raise UsageError(f"case {row.get('qid')} has no case record (a run logged before ragbench.verify)")
        scores = score_keys(row)
        fresh = recompute_case(row, scorers)
        fresh.update(case_scores(row, semantic))  # judge=semantic's scores (ragbench.judge.semantic)
        for key in sorted(set(scores) | set(fresh)):
            if not key.startswith(RECOMPUTED):
                continue
            if key in scores and key in fresh:
                report.check(f"case {row['qid']} {key}", scores[key], fresh[key])
            elif key in scores:
                report.unchecked.append(f"case {row['qid']} {key}: logged but not recomputable from the record")
            elif row["status"] == "ok" and not key.startswith("answer/"):  # answer keys: lexical judge may be off
                report.unchecked.append(f"case {row['qid']} {key}: recomputed but not logged")
        cases.append(case_result(row, {**scores, **{k: v for k, v in fresh.items() if k in scores}}))
        runs = check_repeats(row, report)
        if runs is not None and row["status"] == "ok":
            repeated.append(runs)
    expected = aggregate(cases)
    expected.update(repeat_metrics(repeated, max((len(r) for r in repeated), default=1)))  # repeats=N
    if topk is None and rows and rows[0].get("topk") is not None:
        topk = int(rows[0]["topk"])
    if "retrieval/scope_corpus_fallbacks" in logged:
        expected["retrieval/scope_corpus_fallbacks"] = float(sum(not r["doc_ids"] for r in rows))
    if topk is not None:
        fixed, curves = at_k_views(expected, topk)
        # a curve is logged with k as the step; the run's metric value is its last point. These views
        # repeat metrics checked above under a fixed name: each is checked where the run logged it.
        views = {**fixed, **{name: series[max(series)] for name, series in curves.items()}}
        expected.update({k: v for k, v in views.items() if mlflow_name(k) in logged})
    names = {mlflow_name(k): k for k in expected}
    for key, value in sorted(expected.items()):
        inner = key.split("/", 2)[-1] if key.startswith(GROUPS) else key
        if inner.startswith(NOT_AGGREGATED):
            continue
        name = mlflow_name(key)
        if name not in logged:
            report.unchecked.append(f"run metric {key}: recomputed but not logged")
            continue
        both = sink is not None and name in sink
        report.check(f"run metric {key}", logged[name], value, sink[name] if sink is not None and both else None)
        if both:
            report.sink_checked.add(name)
    for name in sorted(logged):
        inner = name.split("/", 2)[-1] if name.startswith(GROUPS) else name
        if name.endswith("_at_k_curve"):  # a series whose points are the retrieval/<m>_at_<k> checked above
            continue
        if name.startswith(FAMILIES) and not inner.startswith(NOT_AGGREGATED) and name not in names:
            report.unchecked.append(f"run metric {name}: logged but not recomputable from the case record")
    return report


def check_scores_document(rows: Sequence[Mapping[str, Any]], doc: Any, report: Report) -> None:
    """``case_scores.json`` (what ``ragbench.compare`` reads) against the scores document of ``cases.jsonl``:
    every column and every value the same, else one mismatch line per column that differs."""
    want = json.loads(json.dumps(scores_document(rows), ensure_ascii=False))
    if not isinstance(doc, dict) or doc.get("format") != want["format"]:
        report.mismatches.append(f"{SCORES_ARTIFACT}: not a {want['format']} document")
        return
    for column in ("qid", "question_type", "status", "taxonomy"):
        report.compared += 1
        if doc.get(column) != want[column]:
            report.mismatches.append(f"{SCORES_ARTIFACT}: column {column!r} differs from cases.jsonl")
    fields: dict[str, Any] = doc["fields"] if isinstance(doc.get("fields"), dict) else {}
    for key in sorted(set(want["fields"]) | set(fields)):
        got, expected = fields.get(key), want["fields"].get(key)
        report.compared += len(expected or got or ())
        if got is None or expected is None or len(got) != len(expected):
            report.mismatches.append(f"{SCORES_ARTIFACT}: field {key!r} is "
                                     f"{'missing' if got is None else 'not in cases.jsonl' if expected is None else 'of another length'}")
            continue
        differ = [i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]
        if differ:
            report.mismatches.append(f"{SCORES_ARTIFACT}: field {key!r} differs from cases.jsonl in {len(differ)} "
                                     f"of {len(expected)} cases (first: {want['qid'][differ[0]]})")


def default_tracking_uri() -> str:
    """The ``tracking.uri`` jobs use by default (conf/tracking/mlflow.yaml), relative to the cwd."""
    return tracking_defaults()[0]


@dataclass(frozen=True)
class RunArtifacts:
    """What verify reads of a run: its ``cases.jsonl`` and ``case_scores.json`` as stored (bytes; None for a
    file the run does not hold), its logged metrics and its ``retrieval.topk`` param."""

    run_id: str
    cases: bytes
    scores: bytes | None
    metrics: dict[str, float]
    topk: int | None
    scorers: tuple[dict[str, Any], ...] = ()  # the run's metrics.retrieval nodes, from its params
    run_json: bytes | None = None  # its ragbench-run/2 record as stored; None: logged before the record
    params: Mapping[str, str] = field(default_factory=dict)  # its MLflow params
    status: str = ""  # its MLflow status


def reachable(uri: str) -> None:
    """The store at ``uri`` answers in time (``ragbench.tracking.reach``), else a one-line UsageError."""
    try:
        reach.check(uri, reach.default_timeout(), key="--tracking-uri")
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def fetch_run(run_id: str, uri: str) -> RunArtifacts:
    """The run's case artifacts and metrics from the store; a UsageError for a store, run or artifact that
    is not there."""
    db = sqlite_path(uri)
    if db is not None and not db.exists():
        raise UsageError(f"no MLflow store at {uri}; fix: run from the folder the jobs ran in, or pass --tracking-uri")
    reachable(uri)
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient(tracking_uri=uri)
    try:
        run = client.get_run(run_id)
        holder = cases_run_id(run)
        with tempfile.TemporaryDirectory(prefix="ragbench-verify-") as tmp:
            cases = Path(client.download_artifacts(holder, CASES_ARTIFACT, tmp)).read_bytes()
            scores = run_json = None
            names = {f.path for f in client.list_artifacts(holder)}
            if SCORES_ARTIFACT in names:
                scores = Path(client.download_artifacts(holder, SCORES_ARTIFACT, tmp)).read_bytes()
            if RUN_FILE in names:
                run_json = Path(client.download_artifacts(holder, RUN_FILE, tmp)).read_bytes()
    except (MlflowException, OSError) as exc:
        raise UsageError(f"run {run_id} in {uri}: {str(exc).splitlines()[0]}; fix: pass the id of a finished "
                         "ragbench job (and --tracking-uri if it is not the default store)") from None
    topk = run.data.params.get("retrieval.topk")
    return RunArtifacts(run_id=run_id, cases=cases, scores=scores, metrics=dict(run.data.metrics),
                        topk=int(topk) if topk and str(topk).isdigit() else None,
                        scorers=tuple(scorer_nodes(run.data.params)), run_json=run_json,
                        params=dict(run.data.params), status=str(run.info.status))


class DamagedRecord(Exception):
    """A run's case artifact cannot be read as case records (cut off, not UTF-8, not JSON objects): the run
    cannot be checked, exit code 1."""


DAMAGED_FIX = "fix: rerun the job to log a fresh record (its stage cache makes that cheap)"


def parse_cases(data: bytes, run_id: str) -> list[dict[str, Any]]:
    """The rows of a ``cases.jsonl`` as stored, each line read by ``CaseRecord.from_json``; a DamagedRecord
    naming the first line that is not a case record (cut off mid-line, not UTF-8, not JSON, nested too deep,
    not an object, a field missing or mistyped), a UsageError for a row of a run logged before case records
    existed."""
    lines = data.split(b"\n")
    rows: list[dict[str, Any]] = []
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        where = f"run {run_id}: {CASES_ARTIFACT} line {n}"
        try:  # the last line, without the newline every record ends with, is cut off
            record = CaseRecord.from_json(raw, where=where, cut=n == len(lines))
        except RecordError as exc:
            raise DamagedRecord(f"{exc}; {DAMAGED_FIX}") from None
        case = f"{where} (case {record.qid})"
        if record.version < 1:
            raise UsageError(f"{case} has no case record (a run logged before ragbench.verify); fix: rerun the "
                             "job with this ragbench to log one")
        problem = record.recompute_problem()
        if problem:
            raise DamagedRecord(f"{case}: {problem}; {DAMAGED_FIX}")
        rows.append(record.row())
    if not rows:
        raise UsageError(f"run {run_id}: {CASES_ARTIFACT} holds no case; fix: pass the id of a job that ran cases")
    return rows


def parse_scores(data: bytes | None) -> Any:
    """The parsed ``case_scores.json``, ``None`` when the run has none, or the text ``"not JSON"`` (reported
    as a mismatch: not a case-scores document)."""
    if data is None:
        return None
    try:
        return loads_bounded(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):  # NestedTooDeep too
        return "not JSON"


@dataclass(frozen=True)
class Sink:
    """A run with a record: its ``run.json``, and what MLflow, the record's sink, holds of it."""

    record: RunRecord
    metrics: Mapping[str, float]
    params: Mapping[str, str]
    status: str


def read_record(art: RunArtifacts) -> RunRecord | None:
    """The run's ``run.json`` (None for a run logged before the record); a DamagedRecord naming the file and
    what is wrong when it is not a record (cut off, not JSON, an array, a field mistyped)."""
    if art.run_json is None:
        return None
    try:
        return RunRecord.from_json(art.run_json)
    except ValueError as exc:  # RecordError, NestedTooDeep, a kind ragbench does not know
        raise DamagedRecord(f"run {art.run_id}: {exc if RUN_FILE in str(exc) else f'{RUN_FILE}: {exc}'}; "
                            f"{DAMAGED_FIX}") from None


def record_metrics(record: RunRecord) -> dict[str, float]:
    """The run metrics a record holds, by MLflow name: its metrics and the last point of each curve (the
    value MLflow shows of a series)."""
    out = {mlflow_name(k): float(v) for k, v in record.metrics.items()}
    out.update({mlflow_name(k): float(series[max(series)]) for k, series in record.curves.items() if series})
    return out


def check_sink(sink: Sink, logged: Mapping[str, float], report: Report) -> None:
    """MLflow against ``run.json``: the run's status, every metric ``verify_rows`` did not compare with both,
    and every param (the record's config and component params as the job logs them). One line per
    difference, naming the file."""
    record = sink.record
    if sink.status and record.status != sink.status:
        report.mismatches.append(f"{RUN_FILE} status {record.status}, MLflow run {sink.status}")
    for name in sorted(set(logged) | set(sink.metrics)):
        if name in report.sink_checked:
            continue
        if name not in sink.metrics:
            report.mismatches.append(f"{RUN_FILE} metric {name}: {logged[name]:.10g}, not in MLflow")
        elif name not in logged:
            report.mismatches.append(f"MLflow metric {name}: {sink.metrics[name]:.10g}, not in {RUN_FILE}")
        else:
            report.compared += 1
            if difference(logged[name], sink.metrics[name]) > TOLERANCE:
                report.mismatches.append(f"{RUN_FILE} metric {name}: {logged[name]:.10g}, "
                                         f"MLflow {sink.metrics[name]:.10g}")
    params = param_values(start_params(record))
    for key in sorted(set(params) | set(sink.params)):
        report.compared += 1
        ours, theirs = params.get(key), sink.params.get(key)
        if ours != theirs:
            report.mismatches.append(f"{RUN_FILE} config {key}: {'absent' if ours is None else repr(ours)}, "
                                     f"MLflow param {'absent' if theirs is None else repr(theirs)}")


def load_run(run_id: str, uri: str) -> tuple[list[dict[str, Any]], dict[str, float], int | None, Any,
                                             tuple[RetrievalScorer, ...], Sink | None]:
    """The run's case rows, its metrics (its record's, by MLflow name; MLflow's for a run logged before the
    record), top-k and ``metrics.retrieval`` scorers, rebuilt (from the record's config; else the run's
    params), its parsed ``case_scores.json`` (None when the run has none), and its ``Sink`` (None for a run
    logged before the record)."""
    from hydra.utils import instantiate

    art = fetch_run(run_id, uri)
    record = read_record(art)
    rows = parse_cases(art.cases, run_id)
    nodes: Sequence[Any] = art.scorers
    topk, logged, sink = art.topk, dict(art.metrics), None
    if record is not None:
        retrieval = record.config.get("retrieval")
        metrics = record.config.get("metrics")
        nodes = (metrics.get("retrieval") if isinstance(metrics, Mapping) else None) or ()
        k = retrieval.get("topk") if isinstance(retrieval, Mapping) else None
        topk = k if type(k) is int else None
        logged = record_metrics(record)
        sink = Sink(record=record, metrics=dict(art.metrics), params=dict(art.params), status=art.status)
    try:
        scorers = build_scorers(nodes, instantiate)
    except Exception as exc:  # noqa: BLE001 - a scorer that no longer imports: a usage error, one line
        raise UsageError(f"run {run_id}: its metrics.retrieval scorers cannot be rebuilt ({exc}); fix: run verify "
                         "where the scorers' package is importable") from None
    return rows, logged, topk, parse_scores(art.scores), scorers, sink


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragbench.verify", description=__doc__.splitlines()[0])
    parser.add_argument("run_id", help="MLflow run id of a ragbench job")
    parser.add_argument("--tracking-uri", default=None,
                        help=f"MLflow store (default: the jobs' tracking.uri, {default_tracking_uri()})")
    parser.add_argument("--show", type=int, default=20, help="mismatches to list (default 20)")
    args = parser.parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    try:
        reachable(args.tracking_uri or default_tracking_uri())
    except UsageError as exc:
        print(f"ragbench.verify: {exc}", file=sys.stderr)
        return 2
    calibration = load_calibration(args.run_id, args.tracking_uri or default_tracking_uri())
    if calibration is not None:  # a `ragbench.judge calibrate` run: labelled items and their agreement
        report = Report()
        return finish(args.run_id, f"{check_calibration(calibration, report)} labelled items", report, args.show)
    try:
        rows, logged, topk, scores_doc, scorers, sink = load_run(args.run_id,
                                                                 args.tracking_uri or default_tracking_uri())
        semantic = semantic_judges(sink.record.config) if sink is not None else []  # judge=semantic's models
        report = verify_rows(rows, logged, topk, scorers, None if sink is None else sink.metrics, semantic)
        if sink is not None:
            check_sink(sink, logged, report)
        if scores_doc is None and sink is None:  # a run logged before the record: its case_scores.json is gone
            report.unchecked.append(f"{SCORES_ARTIFACT}: missing from the run's artifacts (deleted, or logged "
                                    "before ragbench wrote it); ragbench.compare reads cases.jsonl instead")
        elif scores_doc is not None:
            check_scores_document(rows, scores_doc, report)
    except UsageError as exc:
        print(f"ragbench.verify: {exc}", file=sys.stderr)
        return 2
    except DamagedRecord as exc:
        print(f"ragbench.verify: FAILED: {exc}", file=sys.stderr)
        return 1
    return finish(args.run_id, f"{len(rows)} cases", report, args.show)


def finish(run_id: str, what: str, report: Report, show: int) -> int:
    """Prints what was compared and the first ``show`` mismatches; the exit code (0 all match, 1 not)."""
    print(f"ragbench.verify {run_id}: {what}, {report.compared} values recomputed; "
          f"largest difference {report.worst[0]:.3g} ({report.worst[1] or 'none'})")
    for line in (report.mismatches + report.unchecked)[:show]:
        print(f"  {line}")
    more = len(report.mismatches) + len(report.unchecked) - show
    if more > 0:
        print(f"  ... and {more} more")
    print("OK: every metric matches to 1e-9" if report.ok else
          f"FAILED: {len(report.mismatches)} differ, {len(report.unchecked)} cannot be checked")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
