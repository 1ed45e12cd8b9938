"""A job in waves (ragbench.pipeline, ragbench.llm.wave): every case is expanded before any is generated, a
batched generator's requests go out as one batch for all cases, each case's step runs once (no re-run, no
exception carrying a request out), and a request the batch failed fails that case only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragbench.budget import Budget
from ragbench.llm.batch import BatchReply
from ragbench.llm.client import LLMClient
from ragbench.pipeline import Pipeline
from ragbench.protocols import ApproximateRetriever, OutsideRetriever, QueryBound
from ragbench.session import LEDGER
from ragbench.types import Answer, Context, Query, Usage
from tests.fixtures.toy import toy_components


class Runner:
    """A provider batch stand-in: answers each request, fails the one that names ``broken``."""

    def __init__(self, batches: list[list[str]], broken: str) -> None:
        self.batches, self.broken, self.batch_id = batches, broken, None

    def run(self, bodies: dict[str, dict[str, Any]]) -> dict[str, BatchReply]:
        self.batches.append([b["messages"][-1]["content"] for b in bodies.values()])
        self.batch_id = f"batch_{len(self.batches)}"
        return {cid: BatchReply(None, Usage(), "server_error", batch_id=self.batch_id)
                if self.broken in b["messages"][-1]["content"] else
                BatchReply("answer to " + b["messages"][-1]["content"], Usage(prompt_tokens=2, completion_tokens=1),
                           batch_id=self.batch_id) for cid, b in bodies.items()}


class BatchedGenerator:
    """A generator whose client sends its requests as provider batches (``llm.batch=true``)."""

    identity = "batched-generator"
    max_concurrency = 4

    def __init__(self, events: list[str], batches: list[list[str]], broken: str) -> None:
        self.events = events
        self.client = LLMClient(model="openai/m", api_base="http://127.0.0.1:9/v1", cache=None, batch=True)
        self.client.batch_runner = lambda **_: Runner(batches, broken)  # type: ignore[method-assign]

    def answer(self, query: Query, contexts: Sequence[Context]) -> Answer:
        self.events.append(f"generate {query.qid}")
        reply = self.client.complete([{"role": "user", "content": query.text}])
        return Answer(text=reply.text, model="openai/m", usage=reply.usage)


class RecordingExpander:
    def __init__(self, inner: Any, events: list[str]) -> None:
        self.inner, self.events = inner, events
        self.parent_depth, self.max_context_tokens = inner.parent_depth, inner.max_context_tokens

    def expand(self, hits: Any, tree: Any) -> list[Context]:
        self.events.append("expand")
        return self.inner.expand(hits, tree)


def test_a_batched_job_runs_in_waves_one_batch_each_step_once_and_a_failed_request_fails_its_case():
    LEDGER.start_job(Budget(scope="job"))
    events: list[str] = []
    batches: list[list[str]] = []
    base = toy_components()
    questions = {q.qid: q.text for q in base.dataset.load().queries}
    broken = questions["q2"]
    gen = BatchedGenerator(events, batches, broken)
    recorded: list[str] = []
    pipeline = Pipeline(toy_components(generator=gen, expander=RecordingExpander(base.expander, events)),
                        on_case=lambda case, lookup: recorded.append(case.query.qid))
    result = pipeline.run()
    assert recorded == [c.query.qid for c in result.cases] == ["q1", "q2", "q3"]  # the record: in order, once
    assert events[:3] == ["expand"] * 3 and sorted(events[3:]) == ["generate q1", "generate q2", "generate q3"]
    assert [sorted(b) for b in batches] == [sorted(questions.values())]  # one batch: every case's request
    assert pipeline.batch_ids == ["batch_1"] and gen.client.wave is None  # detached after the job
    by_qid = {c.query.qid: c for c in result.cases}
    assert by_qid["q2"].failed and "batch batch_1 answered this request with an error" in str(by_qid["q2"].error)
    assert by_qid["q2"].contexts and "retrieval/hit_at_1" in by_qid["q2"].scores  # failed at generation only
    assert [by_qid[q].answer.text for q in ("q1", "q3")] == [f"answer to {questions[q]}" for q in ("q1", "q3")]
    assert result.metrics["cases/failed"] == 1 and result.metrics["cases/total"] == 3


def test_the_pipeline_s_special_cases_are_capabilities_the_components_declare():
    from ragbench.retrieval.bm25 import BM25Retriever
    from ragbench.retrieval.dense import FaissRetriever
    from ragbench.retrieval.run_file import RunFileRetriever
    from ragbench.systems.components import SystemRetriever

    assert issubclass(RunFileRetriever, QueryBound) and issubclass(SystemRetriever, QueryBound)
    assert issubclass(SystemRetriever, OutsideRetriever) and not issubclass(RunFileRetriever, OutsideRetriever)
    assert issubclass(FaissRetriever, ApproximateRetriever) and not issubclass(BM25Retriever, ApproximateRetriever)
    assert not issubclass(FaissRetriever, QueryBound)


def test_a_provider_batch_and_the_local_model_are_the_two_wave_answerers():
    from ragbench.llm.batch import BatchRunner
    from ragbench.llm.local.runner import LocalRunner
    from ragbench.protocols import WaveAnswerer

    # a Protocol with a data member refuses issubclass: instances, as the wave gets them
    assert isinstance(BatchRunner(model="openai/m"), WaveAnswerer)
    assert isinstance(LocalRunner.__new__(LocalRunner), WaveAnswerer)  # batch_id and run are the class's
