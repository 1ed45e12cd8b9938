"""``*.timeout`` is a deadline for the whole call (connect, headers and body), not for each read: against a
loopback server that trickles its headers or its body one byte at a time (``tests/fixtures/drip_server.py``,
a drip far longer than the timeout), an outside HTTP system, the LLM client and a provider batch's polls
fail with LLMTimeoutError within a small multiple of the timeout; the case is counted failed, and a job
whose every case timed out ends FAILED. The bounds are loose (4x the timeout): they separate a deadline
from a drip of 20 s and more, they do not time anything."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragbench.errors import LLMError, RagbenchError
from ragbench.llm.errors import LLMTimeoutError
from ragbench.systems.http_system import HttpSystem
from ragbench.types import Query
from tests.fixtures.drip_server import DripServer
from tests.fixtures.jobs import run_job

TIMEOUT = 1.0
BOUND = 4 * TIMEOUT
KEY = "sk-drip-test-key-0042"
QUERY = Query(qid="q1", text="What is the cat called?", answers=("Tom",), question_type="factual")


def _record(method: str, path: str, body: bytes) -> dict[str, object]:
    ask = json.loads(body)
    return {"qid": ask["qid"], "answer": "Tom", "contexts": [{"text": "The cat is called Tom. " * 20}]}


@pytest.fixture(params=["headers", "body"])
def drip(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture()
def system_server(drip: str) -> Iterator[DripServer]:
    with DripServer(_record, drip=drip, gap_s=0.05) as server:  # 40 header lines or ~500 bytes: 25 s and more
        yield server


def _failing(call: object) -> tuple[BaseException, float]:
    start = time.monotonic()
    with pytest.raises(LLMError) as info:
        call()  # type: ignore[operator]
    return info.value, time.monotonic() - start


def test_an_http_system_call_is_cut_at_its_deadline(system_server: DripServer) -> None:
    system = HttpSystem(url=f"{system_server.url}/answer", timeout=TIMEOUT, num_retries=0)
    error, took = _failing(lambda: system.record(QUERY))
    assert isinstance(error, LLMTimeoutError) and "system.timeout=1s" in str(error)
    assert took < BOUND
    deadline = time.monotonic() + 10  # the connection was shut: the server's next writes fail
    while not system_server.connections and time.monotonic() < deadline:
        time.sleep(0.05)
    (seen,) = system_server.connections
    assert seen.hung_up and seen.seconds < BOUND


def slow_answer(question: str) -> dict[str, object]:
    """A ``system=python`` function that takes 30 s."""
    time.sleep(30)
    return {"answer": "Tom", "contexts": []}


def test_a_python_system_call_is_cut_at_its_deadline() -> None:
    from ragbench.systems.python_system import PythonSystem

    system = PythonSystem(target=f"{__name__}:slow_answer", timeout=TIMEOUT, num_retries=0)
    error, took = _failing(lambda: system.record(QUERY))
    assert isinstance(error, LLMTimeoutError) and "system.timeout=1s" in str(error)
    assert took < BOUND


@pytest.mark.slow
def test_a_system_job_whose_every_case_times_out_ends_failed(tmp_path: Path) -> None:
    with DripServer(_record, drip="body", gap_s=0.05) as server:
        with pytest.raises(RagbenchError, match="cases failed"):
            run_job(["dataset=qasper", "dataset.sample_size=2", "judge=lexical", "system=http",
                     f"system.url={server.url}/answer", f"system.timeout={TIMEOUT}", "system.num_retries=0",
                     f"cache.dir={tmp_path}/cache"], tmp_path)
    run = _only_run(tmp_path)
    assert run.info.status == "FAILED" and run.data.metrics["system/failed"] == 2.0
    assert run.data.metrics["cases/failure_rate"] == 1.0
    cases = [json.loads(line) for line in _record_file(run, tmp_path).splitlines()]
    assert [c.get("error_type") for c in cases] == ["LLMTimeoutError"] * 2


@pytest.fixture()
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGBENCH_DRIP_KEY", KEY)


def _warm_up() -> None:
    """litellm's first request loads its tokenizer and provider modules (seconds on a busy machine, once
    per process): done here, against a server that answers at once, before any deadline is tested."""
    from ragbench.llm.client import LLMClient

    with DripServer(slow=lambda body: False) as server:
        LLMClient(model="openai/drip", api_base=f"{server.url}/v1", api_key_env="RAGBENCH_DRIP_KEY",
                  timeout=120, num_retries=0, cache=None).complete([{"role": "user", "content": "hi"}])


@pytest.mark.usefixtures("_key")
def test_an_llm_request_is_cut_at_its_deadline(drip: str) -> None:
    from ragbench.llm.client import LLMClient

    _warm_up()
    with DripServer(drip=drip, gap_s=0.1) as server:  # the chat reply trickles for 30 s and more
        client = LLMClient(model="openai/drip", api_base=f"{server.url}/v1", api_key_env="RAGBENCH_DRIP_KEY",
                           timeout=TIMEOUT, num_retries=0, cache=None)
        error, took = _failing(lambda: client.complete([{"role": "user", "content": "hi"}]))
    assert isinstance(error, LLMTimeoutError) and "llm.timeout=1s" in str(error) and KEY not in str(error)
    assert took < BOUND


@pytest.mark.slow
@pytest.mark.usefixtures("_key")
def test_an_llm_job_whose_every_case_times_out_ends_failed(tmp_path: Path) -> None:
    """The preflight is answered at once; every answer trickles: each case fails, and so does the job
    (it finished with exit 0 after two requests of ~70 s each when ``llm.timeout`` bounded each read)."""
    _warm_up()
    preflight = b"Reply with the single word OK."
    with DripServer(drip="body", gap_s=0.1, slow=lambda body: preflight not in body) as server:
        with pytest.raises(RagbenchError, match="cases failed"):
            run_job(["dataset=qasper", "dataset.sample_size=2", "judge=lexical", "retrieval=bm25",
                     "llm=openai", "llm.model=openai/drip", f"llm.api_base={server.url}/v1",
                     "llm.api_key_env=RAGBENCH_DRIP_KEY",
                     f"llm.timeout={TIMEOUT}", "llm.num_retries=0", f"cache.dir={tmp_path}/cache"], tmp_path)
    run = _only_run(tmp_path)
    assert run.info.status == "FAILED" and run.data.metrics["cases/failure_rate"] == 1.0
    assert run.data.metrics["llm/generation_timeouts"] == 2.0  # booked as attempted work


@pytest.mark.usefixtures("_key")
def test_a_batch_poll_is_cut_at_its_deadline_and_the_wait_is_bounded() -> None:
    from ragbench.llm.batch import MAX_POLL_ERRORS, BatchRunner
    from ragbench.llm.loader import litellm

    batch = {"id": "batch_1", "object": "batch", "endpoint": "/v1/chat/completions", "status": "in_progress",
             "input_file_id": "file-1", "completion_window": "24h", "created_at": 0,
             "request_counts": {"total": 1, "completed": 0, "failed": 0}}
    lib = litellm()
    with DripServer(lambda *_: batch, drip="body", gap_s=0.1) as server:  # each poll's reply: 25 s and more
        runner = BatchRunner(model="openai/drip", api_base=f"{server.url}/v1", api_key=KEY, poll_s=0.0,
                             timeout=TIMEOUT, sleep=lambda s: None)
        runner.batch_id = "batch_1"
        error, took = _failing(lambda: runner._wait(lib, "key"))
    assert f"{MAX_POLL_ERRORS} polls failed in a row (no complete reply within llm.timeout=1s)" in str(error)
    assert took < MAX_POLL_ERRORS * BOUND

    with DripServer(lambda *_: batch, drip="body", gap_s=0.0) as server:  # answered, never done
        runner = BatchRunner(model="openai/drip", api_base=f"{server.url}/v1", api_key=KEY, poll_s=0.0,
                             timeout=TIMEOUT, max_wait_s=0.5, sleep=lambda s: time.sleep(0.05))
        runner.batch_id = "batch_1"
        error, _ = _failing(lambda: runner._wait(lib, "key"))
    assert "still in_progress after llm.batch_max_wait_s=0.5 s" in str(error)


def _only_run(tmp_path: Path):  # type: ignore[no-untyped-def]
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("ragbench").experiment_id])
    return run


def _record_file(run, tmp_path: Path) -> str:  # type: ignore[no-untyped-def]
    """The job's cases.jsonl, read through the pointer its output folder keeps (``stored.json``)."""
    from ragbench.tracking.mlflow_sink import output_files

    (folder,) = [p.parent for p in tmp_path.rglob("stored.json") if "mlruns" not in p.parts]
    return output_files(folder)["cases.jsonl"].decode()
