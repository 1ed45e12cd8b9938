"""One MLflow trace per case of a finished job, written from its record (``cases.jsonl``) after the cases
ran, never inside the pipeline: MLflow 3's view of a question (request, response, spans, assessments).

API (stable; ``ragbench.tracking.mlflow_sink`` calls ``log_job_traces``, and any caller may use the rest):

- ``case_trace(case, *, job, start_ms) -> mlflow.entities.Trace``: the trace of one case line (a dict, as
  ``CaseRecord.row()`` or a parsed ``cases.jsonl`` line), in memory, not written. ``job`` is a ``JobFacts``
  (``job_facts(record, run)``): the experiment, run and sweep, the dataset, the models. Its spans, all under
  a ``CHAIN`` root whose inputs are ``{"question": ...}`` and outputs the answer: ``query transform``
  (``PARSER``, when ``query`` is not ``none``), ``retrieval`` (``RETRIEVER``: the top-k hits handed on,
  after any reranking, as MLflow documents ``{"page_content", "metadata": {"doc_uri", "chunk_id",
  "score", "rank", "gold"}, "id"}``, the shape MLflow's ``RetrievalGroundedness`` and
  ``RetrievalRelevance`` read), ``rerank`` (``RERANKER``, when a reranker ran), ``expand`` (``PARSER``:
  the contexts the generator read), ``generation`` (``LLM``: messages, the answer, token usage, model) and
  one ``judge: <name>`` (``EVALUATOR``) per judge with its scores and reasoning. Each score of the case is
  a ``Feedback`` assessment on the trace: name = the metric key, its value, the judge's reasoning (source
  ``LLM_JUDGE`` naming the model) or the rule's definition (source ``CODE``, ``ragbench:<family>``).
- ``write_traces(tracker, run_id, cases, *, record=None) -> list[str]``: builds and writes one trace per
  case line into the run's experiment, linked to the run (``mlflow.sourceRun``); returns the trace ids in
  case order. Spans go in batches of ``BATCH`` traces (one ``log_spans`` call each), then each trace's
  info with its assessments (one ``start_trace`` each). ``TracesUnsupported`` (a RagbenchError) when the
  tracking server is too old to take traces (it takes no spans: MLflow < 3.4).
- ``log_job_traces(tracker, run_id, folder)``: the sink's hook at a job's end: the record's ``run.json``
  and ``cases.jsonl`` in ``folder`` (before they are replaced by a pointer), traces written as
  ``tracker.traces`` says (``MODES``; a sqlite store's in a background thread while the next job runs,
  waited for at exit), the run tagged ``ragbench.traces`` with what was done.

Timestamps: the record keeps each case's stage latencies, not when the case ran. Cases are laid end to end
from the run's start in record order; within a case the spans follow the pipeline's order, each as long as
its recorded latency (``latency/<stage>_ms``: search, rerank, expand, generate, judge; a stage without one
takes no time; judges share the ``judge`` latency). Durations are real, start times are a layout.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import logging
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbench import metric_keys, session
from ragbench.errors import ConfigError, RagbenchError
from ragbench.record import CASES_ARTIFACT, RUN_FILE, CaseRecord, RunRecord
from ragbench.redact import redact, redact_objs
from ragbench.tracking.store import sqlite_path

if TYPE_CHECKING:
    from mlflow.entities import Trace

    from ragbench.tracking.mlflow_tracker import MlflowTracker

log = logging.getLogger("ragbench")

MODES = ("auto", "on", "off")  # tracking.traces
# auto: a job of at most this many cases gets its traces (docs/benchmarks.md, "Traces", has the cost)
AUTO_MAX_CASES = 50
BATCH = 200  # traces per log_spans call
TRACES_TAG = "ragbench.traces"  # on the run: how many traces were written, or why none
PREVIEW_CHARS = 1000
NO_SPANS = "the tracking server takes no trace spans"  # TracesUnsupported's reason for a server < 3.4
STATUS_WITH_TRACES = ("FINISHED", "FAILED")  # a KILLED job (Ctrl-C, budget, full disk) leaves at once


class TracesUnsupported(RagbenchError):
    """The tracking server cannot store traces (MLflow before 3.4 takes no spans): the sweep goes on
    without them."""


def check_mode(mode: str) -> str:
    """``tracking.traces``, checked: one of ``MODES``, else a one-line ConfigError."""
    if mode not in MODES:
        raise ConfigError(f"tracking.traces={mode!r} is not one of {', '.join(MODES)}; fix: "
                          f"tracking.traces=auto (on up to {AUTO_MAX_CASES} cases a job), on or off")
    return mode


@dataclass(frozen=True)
class JobFacts:
    """What a case's trace takes from its job: where it goes and the job's names and models."""

    experiment_id: str
    run_id: str
    job: str = ""  # the run's name (the job's overrides)
    sweep: str = ""  # the sweep's parent run id, "" for a single run
    dataset: str = ""
    llm_model: str = ""
    query: str = ""  # the query transform's name, "" for none
    reranker: str = ""
    judges: Mapping[str, str] = field(default_factory=dict)  # judge name -> its model ("" for a rule judge)


def job_facts(record: RunRecord | None, run: Any) -> JobFacts:
    """``JobFacts`` of an MLflow ``run`` (``MlflowClient.get_run``) and its ``record`` (None: from the run
    alone, no models named)."""
    tags = run.data.tags
    config: Mapping[str, Any] = record.config if record is not None else {}
    judge_cfg = _node(config, "judge")
    model = str(judge_cfg.get("model") or "")
    judges = {str(name): "" if "Lexical" in str(spec.get("_target_", "")) else str(spec.get("model") or model)
              for name, spec in _node(judge_cfg, "judges").items() if isinstance(spec, Mapping)}
    return JobFacts(
        experiment_id=str(run.info.experiment_id), run_id=str(run.info.run_id),
        job=str(tags.get("mlflow.runName") or run.info.run_name or ""), sweep=str(tags.get("mlflow.parentRunId") or ""),
        dataset=record.dataset if record is not None else str(tags.get("ragbench.dataset", "")),
        llm_model=str(_node(config, "llm").get("model") or ""),
        query=_component(config, "query"), reranker=_component(config, "reranker"), judges=judges)


def _node(config: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = config.get(key)
    return value if isinstance(value, Mapping) else {}


def _component(config: Mapping[str, Any], group: str) -> str:
    """The class name a config group builds (``_target_``'s last part), "" when it is none."""
    node = _node(config, group)
    target = str(node.get("_target_") or next((v.get("_target_") for v in node.values()
                                                if isinstance(v, Mapping) and v.get("_target_")), "") or "")
    name = target.rsplit(".", 1)[-1]
    return "" if not name or name.startswith("No") else name  # NoQueryTransform: none


# --- one case ---------------------------------------------------------------------------------------------

_MS = 1_000_000  # ns per ms


def _b64(value: int, size: int) -> str:
    return base64.b64encode(value.to_bytes(size, "big")).decode("ascii")


@dataclass
class _Tree:
    """The spans of one trace as MLflow's span dicts (``Span.from_dict``), laid out in time."""

    otel_id: int
    trace_id: str
    now_ns: int
    spans: list[dict[str, Any]] = field(default_factory=list)

    def span(self, name: str, kind: str, *, parent: str | None, ms: float, inputs: Any = None,
             outputs: Any = None, attributes: Mapping[str, Any] | None = None, start_ns: int | None = None) -> str:
        """Adds a span starting at ``start_ns`` (default: where the last one ended) lasting ``ms``; its id as
        MLflow shows it (16 hex digits: ``Span.span_id``, what an assessment names)."""
        number = int.from_bytes(os.urandom(8), "big") or 1
        start = self.now_ns if start_ns is None else start_ns
        end = start + max(int(ms * _MS), 0)
        attrs = {"mlflow.traceRequestId": self.trace_id, "mlflow.spanType": kind, **(attributes or {})}
        if inputs is not None:
            attrs["mlflow.spanInputs"] = inputs
        if outputs is not None:
            attrs["mlflow.spanOutputs"] = outputs
        self.spans.append({
            "trace_id": _b64(self.otel_id, 16), "span_id": _b64(number, 8),
            "parent_span_id": None if parent is None else _b64(int(parent, 16), 8), "name": name,
            "start_time_unix_nano": start, "end_time_unix_nano": end, "events": [],
            "status": {"code": "STATUS_CODE_OK", "message": ""},
            "attributes": {k: json.dumps(v, default=str, ensure_ascii=False) for k, v in attrs.items()}})
        if start_ns is None:
            self.now_ns = end
        return f"{number:016x}"


def _latency(case: Mapping[str, Any], stage: str) -> float:
    value = case.get(f"latency/{stage}_ms")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _scores(case: Mapping[str, Any]) -> dict[str, float]:
    """The case's scores: its numeric ``family/metric`` keys (as ``CaseRecord.from_json`` reads them)."""
    return {k: float(v) for k, v in case.items()
            if type(v) in (int, float) and "/" in k and not k.startswith("latency/")}


def _gold(case: Mapping[str, Any]) -> set[str]:
    """The top-k chunk ids that hold gold: covering an evidence unit, or relevant in the chunk qrels."""
    units = case.get("hit_units") or []
    ranked = case.get("ranked_ids") or []
    gold = {cid for cid, hit in zip(ranked, units, strict=False) if hit}
    chunk_qrels = (case.get("qrels") or {}).get("chunk") or {}
    return gold | {cid for cid, rel in chunk_qrels.items() if rel}


def documents(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The top-k hits of a case line as MLflow retriever documents (the ``RETRIEVER`` span's outputs)."""
    ids = case.get("retrieved_ids") or []
    scores = case.get("retrieved_scores") or []
    texts = case.get("topk_texts") or []
    ranked = list(case.get("ranked_ids") or [])
    doc_ids = case.get("ranked_doc_ids") or []
    gold = _gold(case)
    out = []
    for rank, cid in enumerate(ids, start=1):
        at = ranked.index(cid) if cid in ranked else -1
        out.append({"id": cid, "page_content": texts[rank - 1] if rank <= len(texts) else "", "metadata": {
            "doc_uri": str(doc_ids[at]) if 0 <= at < len(doc_ids) else cid, "chunk_id": cid, "rank": rank,
            "score": scores[rank - 1] if rank <= len(scores) else None, "gold": cid in gold}})
    return out


def _contexts(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"id": c.get("chunk_id"), "page_content": c.get("text", ""),
             "metadata": {"chunk_id": c.get("chunk_id"), "title": c.get("title"), "n": n,
                          "has_evidence": c.get("has_evidence")}}
            for n, c in enumerate(case.get("contexts") or [], start=1) if isinstance(c, Mapping)]


def _reasoning(note: Any) -> str:
    """A judge's note for one metric as text: its reasoning (each repeat's), its rubric."""
    if isinstance(note, str):
        return note
    if isinstance(note, Mapping):
        why = note.get("reasoning") or note.get("rationale") or ""
        text = "\n\n".join(str(w) for w in why if w) if isinstance(why, list) else str(why)
        rubric = note.get("rubric")
        return f"{text}\n\n(rubric: {rubric})".strip() if rubric else text
    return json.dumps(note, default=str, ensure_ascii=False) if note else ""


def _judge_keys(name: str, notes: Mapping[str, Any], scores: Mapping[str, float]) -> dict[str, str]:
    """The score keys a judge with ``notes`` produced, each with its reasoning: a noted metric ``m`` is the
    key ``m`` itself or any key ending in ``/m`` outside the retrieval, context and answer families (those
    are rules'); the lexical judge's keys are ``answer/*``."""
    out: dict[str, str] = {}
    for metric, note in notes.items():
        for key in scores:
            if key == metric or (key.endswith(f"/{metric}") and not key.startswith(RULE_FAMILIES)):
                out[key] = _reasoning(note)
    if name == "lexical":
        out.update({k: "" for k in scores if k.startswith("answer/") and k not in out})
    return out


RULE_FAMILIES = ("retrieval/", "context/", "answer/")
_SPAN_OF_FAMILY = {"retrieval": "retrieval", "context": "expand", "answer": "generation"}


def _rule(key: str, memo: dict[str, str]) -> str:
    """The definition of a rule's metric key (``ragbench.metric_keys``), memoised per job."""
    if key not in memo:
        try:
            info = metric_keys.find(key)
        except RagbenchError:
            info = None
        memo[key] = "" if info is None else f"{info.definition} ({info.source})"
    return memo[key]


def case_trace(case: Mapping[str, Any], *, job: JobFacts, start_ms: int,
               rules: dict[str, str] | None = None) -> Trace:
    """The trace of one case line (module docstring: spans, documents, assessments), not written.
    ``start_ms``: when its root span starts (ms since the epoch); ``rules``: a memo of rule definitions
    shared by a job's cases."""
    from mlflow.entities import AssessmentSource, Feedback, Span, Trace, TraceData, TraceInfo, TraceLocation
    from mlflow.entities.trace_state import TraceState
    from mlflow.tracing.utils import generate_mlflow_trace_id_from_otel_trace_id

    [case], _ = redact_objs([dict(case)])  # a record line is written redacted; a caller's may not be
    rules = {} if rules is None else rules
    otel_id = uuid.uuid4().int
    tree = _Tree(otel_id=otel_id, trace_id=generate_mlflow_trace_id_from_otel_trace_id(otel_id),
                 now_ns=start_ms * _MS)
    question, answer = str(case.get("question") or ""), case.get("answer")
    scores = _scores(case)
    ok = case.get("status") == "ok"
    total = sum(_latency(case, s) for s in ("search", "rerank", "expand", "generate", "judge"))
    root = tree.span(f"case {case.get('qid', '')}", "CHAIN", parent=None, ms=total, start_ns=tree.now_ns,
                     inputs={"question": question}, outputs=answer, attributes={
                         "ragbench.qid": case.get("qid"), "ragbench.question_type": case.get("question_type"),
                         "ragbench.status": case.get("status"), "ragbench.gold": case.get("gold"),
                         **({"ragbench.error": case.get("error")} if case.get("error") else {})})
    root_end = tree.spans[0]["end_time_unix_nano"]
    search_ms = _latency(case, "search")
    if job.query:
        tree.span("query transform", "PARSER", parent=root, ms=0, inputs={"question": question},
                  outputs={"transform": job.query, "query_meta": case.get("query_meta") or {}})
    docs = documents(case)
    span_of = {"retrieval": tree.span("retrieval", "RETRIEVER", parent=root, ms=search_ms,
                                      inputs={"query": question}, outputs=docs)}
    stages = (case.get("trace") or {}).get("stages") or []
    if job.reranker or "latency/rerank_ms" in case:
        before = next((s for s in stages if s.get("stage") == "retrieval"), None)
        span_of["rerank"] = tree.span(
            "rerank", "RERANKER", parent=root, ms=_latency(case, "rerank"), outputs=docs,
            inputs={"query": question, "reranker": job.reranker,
                    **({"candidates": [{"chunk_id": i, "score": s} for i, s in
                                       zip(before.get("ids") or [], before.get("scores") or [], strict=False)]}
                       if before else {})})
    span_of["expand"] = tree.span("expand", "PARSER", parent=root, ms=_latency(case, "expand"),
                                  inputs={"chunk_ids": case.get("retrieved_ids") or []}, outputs=_contexts(case))
    if answer is not None or "latency/generate_ms" in case:
        usage = {"input_tokens": int(case.get("prompt_tokens") or 0),
                 "output_tokens": int(case.get("completion_tokens") or 0)}
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        messages = [{"role": "user", "content": question},
                    {"role": "user", "content": "\n\n".join(f"[ref_{c['metadata']['n']}] {c['page_content']}"
                                                            for c in _contexts(case))}]
        span_of["generation"] = tree.span(
            "generation", "LLM", parent=root, ms=_latency(case, "generate"),
            inputs={"messages": messages, "model": job.llm_model},
            outputs={"choices": [{"index": 0, "message": {"role": "assistant", "content": answer or ""}}]},
            attributes={"mlflow.chat.tokenUsage": usage, "mlflow.llm.model": job.llm_model,
                        "ragbench.citations": case.get("citations") or [],
                        "ragbench.latency_ms": _latency(case, "generate")})
    notes = case.get("judge_notes") or {}
    judged: dict[str, tuple[str, str, str]] = {}  # score key -> (span id, rationale, judge name)
    judge_ms = _latency(case, "judge") / max(len(notes), 1)
    for name, judge_notes in notes.items():
        keys = _judge_keys(name, judge_notes if isinstance(judge_notes, Mapping) else {}, scores)
        span = tree.span(f"judge: {name}", "EVALUATOR", parent=root, ms=judge_ms,
                         inputs={"question": question, "answer": answer, "gold": case.get("gold")},
                         outputs={k: {"score": scores[k], **({"reasoning": why} if why else {})}
                                  for k, why in keys.items()},
                         attributes={"ragbench.judge": name, "ragbench.judge_model": job.judges.get(name, "")})
        judged.update({k: (span, why, name) for k, why in keys.items()})
    tree.spans[0]["end_time_unix_nano"] = max(root_end, tree.now_ns)
    end_ms = tree.spans[0]["end_time_unix_nano"] // _MS
    feedback = []
    for key, value in sorted(scores.items()):
        if key in judged:
            span, why, name = judged[key]
            model = job.judges.get(name, "")
            source = AssessmentSource(source_type="LLM_JUDGE" if model else "CODE",
                                      source_id=model or f"ragbench:{name}")
            why = why or _rule(key, rules)
        else:
            family = key.split("/", 1)[0]
            span = span_of.get(_SPAN_OF_FAMILY.get(family, ""), root)
            source, why = AssessmentSource(source_type="CODE", source_id=f"ragbench:{family}"), _rule(key, rules)
        feedback.append(Feedback(name=key, value=value, rationale=why or None, source=source, span_id=span,
                                 trace_id=tree.trace_id, create_time_ms=end_ms, last_update_time_ms=end_ms))
    tags = {"mlflow.traceName": "ragbench case", "ragbench.dataset": job.dataset,
            "ragbench.question_type": str(case.get("question_type") or ""), "ragbench.job": job.job,
            "ragbench.qid": str(case.get("qid") or ""), "ragbench.status": str(case.get("status") or "")}
    if job.sweep:
        tags["ragbench.sweep"] = job.sweep
    request = json.dumps({"question": question}, ensure_ascii=False)
    response = json.dumps(answer, ensure_ascii=False)
    info = TraceInfo(
        trace_id=tree.trace_id, trace_location=TraceLocation.from_experiment_id(job.experiment_id),
        request_time=start_ms, execution_duration=end_ms - start_ms,
        state=TraceState.OK if ok else TraceState.ERROR,
        request_preview=redact(request[:PREVIEW_CHARS]), response_preview=redact(response[:PREVIEW_CHARS]),
        client_request_id=f"{job.run_id}:{case.get('qid', '')}"[:50],  # MLflow's column: VARCHAR(50)
        trace_metadata={"mlflow.sourceRun": job.run_id, "mlflow.trace.tokenUsage": json.dumps(
            {"input_tokens": int(case.get("prompt_tokens") or 0), "output_tokens": int(case.get("completion_tokens") or 0),
             "total_tokens": int(case.get("prompt_tokens") or 0) + int(case.get("completion_tokens") or 0)})},
        tags={k: v for k, v in tags.items() if v}, assessments=list(feedback))
    if not ok:
        tree.spans[0]["status"] = {"code": "STATUS_CODE_ERROR", "message": redact(str(case.get("error") or ""))}
    return Trace(info=info, data=TraceData(spans=[Span.from_dict(s) for s in tree.spans]))


# --- a job's cases -----------------------------------------------------------------------------------------


def write_traces(tracker: MlflowTracker, run_id: str, cases: Sequence[Mapping[str, Any]], *,
                 record: RunRecord | None = None) -> list[str]:
    """One trace per case line (``case_trace``) into ``run_id``'s experiment, linked to the run; returns the
    trace ids in case order. ``TracesUnsupported`` when the server takes no spans (MLflow < 3.4)."""
    from mlflow.tracing.client import TracingClient

    run = tracker.client.get_run(run_id)
    job = job_facts(record, run)
    client = TracingClient(tracker.uri)
    start_ms, rules, ids = int(run.info.start_time or 0), {}, []  # type: ignore[var-annotated]
    for first in range(0, len(cases), BATCH):
        traces = []
        for case in cases[first: first + BATCH]:
            trace = case_trace(case, job=job, start_ms=start_ms, rules=rules)
            start_ms = trace.info.request_time + int(trace.info.execution_duration or 0)
            traces.append(trace)
        if not ids:  # the first trace's spans first: a server too old for them has no trace yet
            _log_spans(client, job.experiment_id, traces[:1])
            client.start_trace(traces[0].info)
            ids.append(traces[0].info.trace_id)
            traces = traces[1:]
        for trace in traces:  # each trace's info and assessments first: its spans then find it (fast)
            client.start_trace(trace.info)
            ids.append(trace.info.trace_id)
        _log_spans(client, job.experiment_id, traces)
    return ids


def _log_spans(client: Any, experiment_id: str, traces: Sequence[Trace]) -> None:
    """The spans of ``traces`` in one call; ``TracesUnsupported`` from a server that takes none."""
    if not traces:
        return
    try:
        client.log_spans(experiment_id, [s for t in traces for s in t.data.spans])
    except NotImplementedError as exc:  # MLflow's REST store: a server before 3.4 (or of no version)
        raise TracesUnsupported(f"{NO_SPANS} ({exc})") from None
    except Exception as exc:
        if _too_old(exc):
            raise TracesUnsupported(f"{NO_SPANS} ({_first_line(exc)})") from None
        raise


def _too_old(exc: BaseException) -> bool:
    """An answer of a server without MLflow 3's trace endpoints: 404 / ENDPOINT_NOT_FOUND, 501."""
    text = str(exc)
    code = str(getattr(exc, "error_code", "") or "")
    return code in ("ENDPOINT_NOT_FOUND", "NOT_IMPLEMENTED") or any(
        s in text for s in ("ENDPOINT_NOT_FOUND", "404", "501", "not supported"))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]


@dataclass
class _Writer:
    """The session's trace writer for sqlite stores: one background thread, so a job's traces are written
    while the next job runs (the store's work is this process's; sqlite takes one writer at a time). The
    process waits for it at exit (``drain``, an exit handler registered at the first job it takes)."""

    warned: set[str] = field(default_factory=set)  # tracking URIs said to be too old for traces
    pool: Any = None  # a ThreadPoolExecutor of one thread, made at the first job
    pending: int = 0

    def submit(self, tracker: MlflowTracker, run_id: str, cases: list[dict[str, Any]],
               record: RunRecord) -> None:
        if self.pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragbench-traces")
            atexit.register(self.drain)
        self.pending += 1
        self.pool.submit(self._write, tracker, run_id, cases, record)

    def _write(self, tracker: MlflowTracker, run_id: str, cases: list[dict[str, Any]], record: RunRecord) -> None:
        try:
            _write_job(tracker, run_id, cases, record, self)
        except Exception as exc:  # noqa: BLE001 - the job has ended: its run says what failed
            log.error("the MLflow traces of run %s were not written: %s", run_id, _first_line(exc))
            with contextlib.suppress(Exception):
                tracker.set_tags(run_id, {TRACES_TAG: f"failed: {_first_line(exc)}"})
        finally:
            self.pending -= 1

    def drain(self) -> None:
        """Waits for the traces still being written (an interrupt drops those not started)."""
        if self.pool is None:
            return
        if self.pending:
            log.info("writing the MLflow traces of %d more job(s) before leaving", self.pending)
        self.pool.shutdown(wait=True, cancel_futures=session.current().signals.requested is not None)
        self.pool = None


def _write_job(tracker: MlflowTracker, run_id: str, cases: Sequence[Mapping[str, Any]], record: RunRecord,
               writer: _Writer) -> None:
    """A job's traces and its ``ragbench.traces`` tag; a server too old for traces is said once."""
    if tracker.uri in writer.warned:
        tracker.set_tags(run_id, {TRACES_TAG: f"none: {NO_SPANS}"})
        return
    try:
        ids = write_traces(tracker, run_id, cases, record=record)
    except TracesUnsupported as exc:
        writer.warned.add(tracker.uri)
        log.warning("no MLflow traces: %s; the jobs run without them (fix: MLflow >= 3.4 on the server, "
                    "or tracking.traces=off)", exc)
        tracker.set_tags(run_id, {TRACES_TAG: f"none: {NO_SPANS}"})
        return
    tracker.set_tags(run_id, {TRACES_TAG: str(len(ids))})


def wanted(mode: str, cases: int) -> tuple[bool, str]:
    """Whether a job of ``cases`` cases gets traces under ``mode``, and the ``ragbench.traces`` tag if not."""
    if mode == "off":
        return False, "off (tracking.traces=off)"
    if mode == "auto" and cases > AUTO_MAX_CASES:
        return False, f"off (tracking.traces=auto: {cases} cases > {AUTO_MAX_CASES}; tracking.traces=on)"
    return True, ""


def log_job_traces(tracker: MlflowTracker, run_id: str, folder: Path) -> None:
    """The sink's hook at a job's end, while ``folder`` still holds the record's files: a FINISHED or
    FAILED job's cases as traces, as ``tracker.traces`` says, and the run tagged ``ragbench.traces`` (the
    count, or why none). A sqlite store's are written in the background while the next job runs (the
    process waits for them at exit); a server's now (the server does the store's work). A server too
    old for traces: one warning line per store and session, the jobs go on without them."""
    mode = getattr(tracker, "traces", "off")
    run_file, cases_file = folder / RUN_FILE, folder / CASES_ARTIFACT
    if mode == "off" or not run_file.is_file() or not cases_file.is_file():
        return
    record = RunRecord.from_json(run_file.read_bytes())
    if record.kind != "job" or record.status not in STATUS_WITH_TRACES:
        return
    data = cases_file.read_bytes()
    go, why = wanted(mode, data.count(b"\n"))
    if not go:
        tracker.set_tags(run_id, {TRACES_TAG: why})
        return
    cases = [CaseRecord.from_json(line).row() for line in data.splitlines() if line.strip()]
    writer = session.current().caches.slot(__name__, _Writer)
    if sqlite_path(tracker.uri) is not None:
        writer.submit(tracker, run_id, cases, record)
    else:
        _write_job(tracker, run_id, cases, record, writer)


def trace_count(value: str | None) -> int:
    """The number of traces a run's ``ragbench.traces`` tag says were written (0: none, or no tag)."""
    return int(value) if value and value.isdigit() else 0


