"""A case's MLflow trace built from its record line (spans, documents, assessments), the traces mode, and a
tracking server too old for traces (a fake trace client: no store is opened here)."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from ragbench import redact, session
from ragbench.errors import ConfigError
from ragbench.record import RunRecord
from ragbench.tracking import traces
from ragbench.tracking.traces import JobFacts, case_trace, check_mode, log_job_traces, wanted, write_traces

SECRET = "sk-test-abcdefghijklmnopqrstuvwxyz012345"


def _case(**extra):
    return {
        "qid": "q1", "question_type": "temporal", "question": f"When did Ann move? key {SECRET}", "gold": "2020",
        "answer": "In 2020 [1]", "status": "ok", "error": None, "error_type": None, "answerable": True,
        "retrieved_ids": ["d1#c2", "d1#c7"], "retrieved_scores": [0.9, 0.4], "ranked_ids": ["d1#c2", "d1#c7", "d2#c1"],
        "ranked_doc_ids": ["d1", "d1", "d2"], "hit_units": [["ev0"], [], []], "qrels": {"chunk": {}, "unit": {"ev0": 1}},
        "topk_texts": ["Ann moved in 2020.", "Bob stayed."], "citations": [1], "prompt_tokens": 120,
        "completion_tokens": 7, "context_ids": ["d1#c2"], "context_parts": [[]],
        "contexts": [{"chunk_id": "d1#c2", "title": "s1", "text": "Ann moved in 2020.", "has_evidence": True}],
        "judge_notes": {"lexical": {}, "llm": {"accuracy": {"rubric": "default", "reasoning": ["Matches the gold year."]}}},
        "answer/f1": 0.5, "retrieval/hit_at_1": 1.0, "context/evidence_text_recall": 1.0, "judge/accuracy": 1.0,
        "latency/search_ms": 12.0, "latency/expand_ms": 1.0, "latency/generate_ms": 300.0, "latency/judge_ms": 80.0,
        **extra}


JOB = JobFacts(experiment_id="1", run_id="r1", job="topk=5 #0", sweep="p1", dataset="locomo", llm_model="gen-m",
               judges={"lexical": "", "llm": "judge-m"})


def test_a_case_is_a_chain_of_retrieval_generation_and_judge_spans_timed_by_its_latencies():
    trace = case_trace(_case(), job=JOB, start_ms=1_000_000)
    spans = {s.name: s for s in trace.data.spans}
    assert [(s.name, s.span_type) for s in trace.data.spans] == [
        ("case q1", "CHAIN"), ("retrieval", "RETRIEVER"), ("expand", "PARSER"), ("generation", "LLM"),
        ("judge: lexical", "EVALUATOR"), ("judge: llm", "EVALUATOR")]
    root = spans["case q1"]
    assert all(s.parent_id == root.span_id for s in trace.data.spans[1:])
    assert spans["retrieval"].start_time_ns == 1_000_000 * 1_000_000
    assert spans["retrieval"].end_time_ns - spans["retrieval"].start_time_ns == 12_000_000
    assert spans["generation"].start_time_ns == spans["expand"].end_time_ns
    assert root.end_time_ns - root.start_time_ns == 393_000_000 and trace.info.execution_duration == 393
    docs = spans["retrieval"].outputs
    assert docs[0] == {"id": "d1#c2", "page_content": "Ann moved in 2020.", "metadata": {
        "doc_uri": "d1", "chunk_id": "d1#c2", "rank": 1, "score": 0.9, "gold": True}}
    assert docs[1]["metadata"]["gold"] is False
    gen = spans["generation"]
    assert gen.get_attribute("mlflow.chat.tokenUsage") == {"input_tokens": 120, "output_tokens": 7, "total_tokens": 127}
    assert gen.outputs["choices"][0]["message"]["content"] == "In 2020 [1]"
    assert spans["judge: llm"].outputs == {"judge/accuracy": {"score": 1.0, "reasoning": "Matches the gold year.\n\n"
                                                                                       "(rubric: default)"}}
    assert trace.info.tags["ragbench.question_type"] == "temporal" and trace.info.tags["ragbench.sweep"] == "p1"
    assert trace.info.tags["ragbench.dataset"] == "locomo" and trace.info.tags["ragbench.job"] == "topk=5 #0"
    assert trace.info.trace_metadata["mlflow.sourceRun"] == "r1"
    assert json.loads(trace.info.response_preview) == "In 2020 [1]"


def test_every_score_is_an_assessment_naming_its_judge_or_rule():
    trace = case_trace(_case(), job=JOB, start_ms=0)
    by_name = {a.name: a for a in trace.info.assessments}
    assert set(by_name) == {"answer/f1", "retrieval/hit_at_1", "context/evidence_text_recall", "judge/accuracy"}
    llm = by_name["judge/accuracy"]
    assert (llm.source.source_type, llm.source.source_id, llm.value) == ("LLM_JUDGE", "judge-m", 1.0)
    assert llm.rationale.startswith("Matches the gold year.")
    assert llm.span_id == next(s.span_id for s in trace.data.spans if s.name == "judge: llm")
    f1 = by_name["answer/f1"]
    assert (f1.source.source_type, f1.source.source_id) == ("CODE", "ragbench:lexical")
    assert f1.rationale and "F1" in f1.rationale  # the rule's definition (ragbench.metric_keys)
    hit = by_name["retrieval/hit_at_1"]
    assert hit.source.source_id == "ragbench:retrieval"
    assert hit.span_id == next(s.span_id for s in trace.data.spans if s.name == "retrieval")


def test_secrets_never_reach_a_trace():
    redact.register(SECRET)  # as ragbench registers the environment's and the command line's secrets
    trace = case_trace(_case(answer="api_key=hunter2-not-a-real-key"), job=JOB, start_ms=0)
    text = json.dumps([s.to_dict() for s in trace.data.spans]) + json.dumps(trace.info.to_dict())
    assert SECRET not in text and "hunter2" not in text and "When did Ann move?" in text


def test_a_failed_case_is_an_error_trace_and_a_reranker_adds_its_span():
    trace = case_trace(_case(status="failed", error="LLMError: timed out", answer=None,
                             **{"latency/rerank_ms": 5.0}), job=JOB, start_ms=0)
    assert trace.info.state.value == "ERROR"
    assert [s.span_type for s in trace.data.spans if s.name == "rerank"] == ["RERANKER"]


def test_the_traces_mode_is_checked_and_auto_stops_above_its_case_count():
    assert check_mode("auto") == "auto"
    with pytest.raises(ConfigError, match=r"tracking.traces='maybe' is not one of auto, on, off"):
        check_mode("maybe")
    assert wanted("auto", traces.AUTO_MAX_CASES) == (True, "")
    go, why = wanted("auto", traces.AUTO_MAX_CASES + 1)
    assert not go and "tracking.traces=on" in why
    assert wanted("on", 10**6)[0] and not wanted("off", 1)[0]


class _Tracker:
    def __init__(self, mode="on", uri="http://old-server:5000"):
        self.uri, self.traces, self.tags = uri, mode, {}
        run = SimpleNamespace(info=SimpleNamespace(experiment_id="1", run_id="r1", run_name="job", start_time=5),
                              data=SimpleNamespace(tags={}))
        self.client = SimpleNamespace(get_run=lambda run_id: run)

    def set_tags(self, run_id, tags):
        self.tags.update(tags)


class _OldServer:
    """MLflow's REST store on a server before 3.4: it takes no spans (``log_spans`` raises)."""

    started: list[str] = []

    def __init__(self, uri):
        pass

    def log_spans(self, location, spans):
        raise NotImplementedError("log_spans is not supported: MLflow server version 2.21.3 is less than 3.4")

    def start_trace(self, info):
        self.started.append(info.trace_id)


def _folder(tmp_path, status="FINISHED", cases=2):
    rec = RunRecord(name="job", job_hash="h", config={}, status=status, dataset="locomo")
    (tmp_path / "run.json").write_text(rec.to_json())
    lines = [json.dumps({**_case(qid=f"q{i}"), "context_parts": [[]], "record_version": 1}) for i in range(cases)]
    (tmp_path / "cases.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_a_server_too_old_for_traces_is_one_line_and_the_jobs_go_on(tmp_path, monkeypatch, caplog):
    import mlflow.tracing.client

    monkeypatch.setattr(mlflow.tracing.client, "TracingClient", _OldServer)
    monkeypatch.setattr(session, "_current", None)  # a session of this test's own
    tracker = _Tracker()
    with pytest.raises(traces.TracesUnsupported, match="takes no trace spans"):
        write_traces(tracker, "r1", [_case()])
    assert _OldServer.started == []  # no trace without its spans
    caplog.set_level(logging.WARNING, logger="ragbench")
    assert log_job_traces(tracker, "r1", _folder(tmp_path)) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0] and "MLflow >= 3.4" in warnings[0]
    assert tracker.tags == {traces.TRACES_TAG: "none: the tracking server takes no trace spans"}
    assert log_job_traces(_Tracker(), "r2", _folder(tmp_path)) is None  # the next job: not said again
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_off_reads_nothing_and_a_killed_job_or_auto_above_the_count_writes_none(tmp_path, monkeypatch):
    import mlflow.tracing.client

    monkeypatch.setattr(mlflow.tracing.client, "TracingClient", _OldServer)
    tracker = _Tracker("off")
    log_job_traces(tracker, "r1", tmp_path)  # no record files needed
    log_job_traces(tracker, "r1", _folder(tmp_path, status="KILLED"))
    assert tracker.tags == {}
    monkeypatch.setattr(traces, "AUTO_MAX_CASES", 1)
    tracker = _Tracker("auto")
    log_job_traces(tracker, "r1", _folder(tmp_path, cases=2))
    assert tracker.tags[traces.TRACES_TAG].startswith("off (tracking.traces=auto: 2 cases > 1")


class _Store:
    """A store that takes traces (as sqlite does), keeping what it was given."""

    spans: list = []
    infos: list = []

    def __init__(self, uri):
        pass

    def log_spans(self, location, spans):
        self.spans.extend(spans)

    def start_trace(self, info):
        self.infos.append(info)


def test_a_sqlite_stores_traces_are_written_in_the_background_and_waited_for(tmp_path, monkeypatch):
    import mlflow.tracing.client

    monkeypatch.setattr(mlflow.tracing.client, "TracingClient", _Store)
    monkeypatch.setattr(session, "_current", None)
    monkeypatch.setattr("atexit.register", lambda fn: None)  # drained here, not at this test process's exit
    tracker = _Tracker("on", uri=f"sqlite:///{tmp_path}/mlflow.db")
    log_job_traces(tracker, "r1", _folder(tmp_path, cases=3))
    session.current().caches.slot(traces.__name__, lambda: None).drain()
    assert tracker.tags == {traces.TRACES_TAG: "3"}
    assert [i.tags["ragbench.qid"] for i in _Store.infos] == ["q0", "q1", "q2"]
    assert len({s.trace_id for s in _Store.spans}) == 3
    starts = [i.request_time for i in _Store.infos]
    assert starts[0] == 5 and starts == sorted(starts) and starts[1] == starts[0] + _Store.infos[0].execution_duration
