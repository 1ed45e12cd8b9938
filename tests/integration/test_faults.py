"""Fault injection: real jobs against the loopback OpenAI-compatible server, one fault switch at a time.

For each fault (429, 500, stall, garbage, empty ``choices``, huge reply) aimed at every other question
of a LoCoMo sample, a job runs with ``llm=openai_compatible`` and ``judge=[lexical,llm]``; the test
recomputes the end-to-end figures (a failed case scores 0) and the successful-only figures from
``cases.jsonl`` and checks them against the logged metrics, accounts for every request the server
received, then reruns the job on a healthy server and checks it sends exactly the missing requests.
Also: an echoed key never reaches a record; all-failed jobs end FAILED with their scores logged as 0;
an unreachable endpoint and a missing reranker model fail the job once, up front, in one line.
"""

from __future__ import annotations

import html
import json
import os
import re
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hydra.utils import instantiate

from ragbench.errors import RagbenchError
from tests.fixtures.jobs import compose_cfg, run_job
from tests.fixtures.llm_server import LLMServer, Step

pytestmark = pytest.mark.slow
KEY = "sk-fault-canary-9d2e71b04c"
ROOT = Path(__file__).resolve().parents[2]
N = 8  # questions per job
SCORES = ("answer/f1", "answer/em", "judge/accuracy", "judge/score")
CASE_FAILED = re.compile(r"case \S+ failed: \w+Error")  # the per-case warning
_QUESTION = re.compile(r"<question>(.*?)</question>|Question: (.*?)\nAnswer:", re.DOTALL)


@pytest.fixture(scope="module")
def server():
    with LLMServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def golds(tmp_path_factory) -> dict[str, str]:
    """question -> its first gold answer, for the sample every job here runs on."""
    return {q.text.strip(): q.answers[0] for q in sample(tmp_path_factory.mktemp("probe"))}


@pytest.fixture(autouse=True)
def _env(server, golds, monkeypatch):
    monkeypatch.setenv("RAGBENCH_FAULT_KEY", KEY)
    server.reset()
    server.responder = lambda body: reply(body, golds)
    yield
    server.reset()


def reply(body: dict, golds: dict[str, str]) -> str:
    """Answers with the first half (and one more word) of the gold answer, so F1 and EM vary by question;
    the judge scores 4 or 0 by the parity of the question's length."""
    question = question_of(body) or ""
    if is_judge(body):
        return json.dumps({"score": 4 * (len(question) % 2), "reasoning": "fixture"})
    words = golds.get(question, "Not mentioned").split()
    return " ".join(words[: len(words) // 2 + 1]) + " [ref_1]"


def question_of(body: dict) -> str | None:
    """The question a request is about (None for the preflight request)."""
    messages = body.get("messages") or [{}]
    match = _QUESTION.search(str(messages[-1].get("content", "")))  # the user message (the system one
    # of the judge names the <question> tag too)
    return html.unescape(next(g for g in match.groups() if g is not None)).strip() if match else None


def is_judge(body: dict) -> bool:
    return any('"score"' in str(m.get("content", "")) for m in body.get("messages", []))


def overrides(server, tmp_path: Path, name: str, *extra: str) -> list[str]:
    return [
        "retrieval=bm25", f"dataset.sample_size={N}", f"cache.dir={tmp_path}/cache",
        "llm=openai_compatible", f"llm.model=openai/gen-{name}", f"llm.api_base={server.url}",
        "llm.api_key_env=RAGBENCH_FAULT_KEY", "llm.num_retries=1", "llm.backoff_s=0", "llm.timeout=3",
        "llm.max_concurrency=2",
        "judge=[lexical,llm]", f"judge.model=openai/judge-{name}", f"judge.api_base={server.url}",
        "judge.api_key_env=RAGBENCH_FAULT_KEY", "judge.num_retries=1", "judge.backoff_s=0", "judge.timeout=3",
        *extra,
    ]


def sample(tmp_path: Path) -> list:
    cfg = compose_cfg(["retrieval=bm25", f"dataset.sample_size={N}"], tmp_path)
    return sorted(instantiate(cfg.dataset).load().queries, key=lambda q: q.qid)


def faulted_questions(tmp_path: Path) -> set[str]:
    """Every other question of the sample, by qid: the ones a fault is aimed at."""
    return {q.text.strip() for q in sample(tmp_path / "probe")[::2]}


def cases_of(client, run) -> list[dict]:
    path = client.download_artifacts(run.info.run_id, "cases.jsonl")
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def expected_figures(rows: list[dict]) -> dict[str, float]:
    """End-to-end (a failed case is 0, whatever partial scores it holds) and successful-only figures."""
    ok = [r for r in rows if r["status"] == "ok"]
    out = {}
    for key in SCORES:
        out[key] = sum(r.get(key, 0.0) for r in ok) / len(rows)
        present = [r[key] for r in ok if key in r]
        if present:
            out[f"{key}_successful"] = sum(present) / len(present)
    return out


def judge_calls(row: dict) -> int:
    """LLM judge requests an OK case made: four rubrics, none for a refusal to an unanswerable question."""
    return 0 if row.get("judge/heuristic_refusal") == 1.0 else 4


FAULTS = {  # name: (what the fault hits, the fault, attempts per faulted call, the case's error class)
    "429": ("judge", Step(status=429), 2, "LLMRateLimitError"),
    "500": ("answer", Step(status=500), 2, "LLMServerError"),
    # timeouts of 3 s (a loaded CI machine answers a normal request well within them), the stall twice that
    "stall": ("judge", Step(delay_s=6), 2, "LLMTimeoutError"),
    "garbage": ("answer", Step(garbage=True), 2, "LLMServerError"),
    "empty_choices": ("answer", Step(no_choices=True), 2, "LLMResponseError"),
    "huge": ("answer", Step(size=5_000_000), 1, "LLMReplyTooLargeError"),
}


@pytest.mark.parametrize("name", list(FAULTS))
def test_fault_figures_and_rerun_requests(server, tmp_path, name):
    target, step, attempts, error_type = FAULTS[name]
    hit = faulted_questions(tmp_path)
    server.rule = lambda body: step if question_of(body) in hit and (is_judge(body) == (target == "judge")) else None
    run, client = run_job(overrides(server, tmp_path, name, "max_failure_rate=1"), tmp_path)
    assert run.info.status == "FINISHED"
    rows = cases_of(client, run)
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(rows) == N and {r["question"].strip() for r in failed} == hit
    assert {r["error_type"] for r in failed} == {error_type}
    if target == "judge":  # the lexical judge had scored these cases: their F1 must not count
        assert all("answer/f1" in r for r in failed)
    metrics = run.data.metrics
    want = expected_figures(rows)
    for key, value in want.items():
        assert metrics[key] == pytest.approx(value, abs=1e-12), key
    assert metrics["cases/failed"] == len(hit) and metrics["cases/failure_rate"] == len(hit) / N
    kept = sum(r.get("answer/f1", 0.0) for r in rows) / N  # what counting failed cases' partial F1 gave
    print(f"fault {name}: " + ", ".join(f"{k}={metrics[k]:.4f}" for k in sorted(want)) + f"; partial-F1 {kept:.4f}")
    # every request accounted for: two preflights, each OK case's, each faulted call's attempts
    per_question = Counter(question_of(b) for b in server.requests)
    assert per_question.pop(None) == 2
    for r in rows:
        q = r["question"].strip()
        if r["status"] == "ok":
            assert per_question[q] == 1 + judge_calls(r), q
        else:
            assert per_question[q] == attempts + (1 if target == "judge" else 0), q
    if name == "huge":
        assert not any(len(json.dumps(b)) > 1_000_000 for b in server.requests)  # never sent to the judge
        assert max(p.stat().st_size for p in (tmp_path / "cache").rglob("*") if p.is_file()) < 1_000_000
    # a rerun on a healthy server sends exactly the requests that are missing, nothing else
    server.reset()
    again, client = run_job(overrides(server, tmp_path, name), tmp_path)
    rerun_rows = {r["question"].strip(): r for r in cases_of(client, again)}
    assert again.info.status == "FINISHED" and again.data.metrics["cases/failed"] == 0
    sent = Counter(question_of(b) for b in server.requests)
    assert set(sent) == hit
    for q in hit:
        assert sent[q] == (1 if target == "answer" else 0) + judge_calls(rerun_rows[q]), q


def test_an_echoed_key_reaches_no_record(server, tmp_path):
    server.rule = lambda body: Step(echo_key=True)
    run, client = run_job(overrides(server, tmp_path, "echo"), tmp_path)
    rows = cases_of(client, run)
    assert run.info.status == "FINISHED" and all(r["status"] == "ok" for r in rows)
    assert all(r["answer"].endswith("***") for r in rows)
    judge_prompts = [json.dumps(b) for b in server.requests if is_judge(b)]
    assert judge_prompts and all("***" in p and KEY not in p for p in judge_prompts)
    blobs = [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()]  # caches, MLflow store, artifacts
    assert len(blobs) > 10 and all(KEY.encode() not in b for b in blobs)


def _failed_run(server, tmp_path, name, *extra):
    with pytest.raises(RagbenchError):  # on its way up: __main__ turns it into exit 1 (test_main_exit)
        run_job(overrides(server, tmp_path, name, *extra), tmp_path)
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("ragbench").experiment_id])
    return run


@pytest.mark.parametrize("status", [401, 429, 500])
def test_every_case_failing_fails_the_job_with_scores_logged_as_zero(server, tmp_path, status):
    server.rule = lambda body: Step(status=status) if question_of(body) else None  # the preflight passes
    run = _failed_run(server, tmp_path, f"all{status}", "llm.num_retries=0", "llm.max_consecutive_failures=0")
    assert run.info.status == "FAILED"
    error = run.data.tags["ragbench.error"]
    assert error.startswith("[RB-JOB-001] JobFailedError: 8 of 8 cases failed") and "max_failure_rate=0.5" in error
    assert "\n" not in error
    for key in SCORES:
        assert run.data.metrics[key] == 0.0, key
    assert run.data.metrics["cases/failure_rate"] == 1.0
    assert server.count == 2 + N  # two preflights, one attempt per case, no judge call


def test_above_threshold_fails_below_passes(server, tmp_path):
    hit = faulted_questions(tmp_path)  # 4 of 8: failure rate 0.5
    server.rule = lambda body: Step(status=500) if question_of(body) in hit and not is_judge(body) else None
    run = _failed_run(server, tmp_path, "rate", "llm.num_retries=0", "max_failure_rate=0.49")
    assert run.info.status == "FAILED" and "failure rate 0.500 > max_failure_rate=0.49" in run.data.tags[
        "ragbench.error"]
    run, _ = run_job(overrides(server, tmp_path, "rate", "llm.num_retries=0", "max_failure_rate=0.5"), tmp_path)
    assert run.info.status == "FINISHED" and run.data.metrics["cases/failure_rate"] == 0.5


def test_a_refused_key_fails_the_job_at_the_preflight(server, tmp_path):
    server.rule = lambda body: Step(status=401)
    run = _failed_run(server, tmp_path, "auth")
    assert run.data.tags["ragbench.error"].startswith(
        "[RB-LLM-006] LLMAuthError: preflight request before the case loop failed: llm model 'openai/gen-auth'")
    assert server.count == 1  # one request, not one per case
    assert run.data.metrics["answer/f1"] == 0.0 and run.data.metrics["judge/accuracy"] == 0.0


def test_the_breaker_stops_the_case_loop_after_consecutive_auth_failures(server, tmp_path):
    server.rule = lambda body: Step(status=401) if question_of(body) else None  # the key is revoked mid-run
    run = _failed_run(server, tmp_path, "breaker", "llm.max_concurrency=1", "llm.max_consecutive_failures=3")
    error = run.data.tags["ragbench.error"]
    assert error.startswith("[RB-LLM-010] LLMCircuitOpenError: llm model 'openai/gen-breaker' at " + server.url)
    assert "3 calls in a row failed (AuthenticationError" in error and "; fix: export a valid key" in error
    assert server.count == 2 + 3  # the preflights, then three refused calls; the other cases are not run
    assert run.data.metrics["cases/failed"] == N and run.data.metrics["answer/f1"] == 0.0


# ------------------------------------------------------------------ the command line: one line, exit 1
def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ragbench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAGBENCH_FAULT_KEY": KEY}
    store = tmp_path / "mlruns"
    cmd = [sys.executable, "-m", "ragbench", *args, f"tracking.uri=sqlite:///{store}/mlflow.db",
           f"tracking.artifact_root={store}/artifacts", f"cache.dir={tmp_path}/cache"]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)


def _error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "ERROR" in line]


def test_an_unreachable_endpoint_fails_the_job_up_front_in_one_line(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    proc = _ragbench(tmp_path, "retrieval=bm25", "llm=openai_compatible", "llm.model=openai/nobody-home",
                     f"llm.api_base={url}", "llm.api_key_env=RAGBENCH_FAULT_KEY", "hydra.run.dir=out")
    assert proc.returncode == 1
    (line,) = _error_lines(proc.stderr)
    assert "preflight request before the case loop failed: llm model 'openai/nobody-home' at " + url in line
    assert "fix: check llm.api_base and that the server is running" in line
    assert "Traceback" not in proc.stderr and not CASE_FAILED.search(proc.stderr)  # no case ran
    assert KEY not in proc.stderr + proc.stdout


def test_a_smoke_sweep_whose_reranker_cannot_load_fails_once_per_job_and_exits_non_zero(tmp_path):
    proc = _ragbench(tmp_path, "-m", "experiment=smoke", "retrieval=bm25", "dataset=locomo,qasper",
                     "reranker=cross_encoder", "reranker.rerankers.cross_encoder.model=/nonexistent/cross-encoder",
                     "hydra.sweep.dir=multirun")
    assert proc.returncode == 1
    loads = [line for line in _error_lines(proc.stderr) if "could not load cross-encoder" in line]
    assert len(loads) == 2  # once per job, before the case loop, not once per case
    assert not CASE_FAILED.search(proc.stderr) and "2 of 2 jobs failed" in proc.stdout + proc.stderr


def test_a_smoke_sweep_whose_every_case_fails_exits_non_zero_with_scores_logged_as_zero(tmp_path):
    proc = _ragbench(tmp_path, "-m", "experiment=smoke", "retrieval=bm25", "dataset=locomo",
                     "llm._target_=tests.fixtures.components.FlakyAnswerer", "+llm.fail_every=1",
                     "hydra.sweep.dir=multirun")
    assert proc.returncode == 1
    assert "1 of 1 jobs failed" in proc.stdout + proc.stderr
    (line,) = [x for x in _error_lines(proc.stderr) if "JobFailedError" in x or "cases failed" in x]
    assert "12 of 12 cases failed (failure rate 1.000 > max_failure_rate=0.5)" in line
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("ragbench").experiment_id],
                              filter_string="tags.`ragbench.role` = 'job'")
    (job,) = runs
    assert job.info.status == "FAILED" and job.data.metrics["answer/f1"] == 0.0
    assert job.data.metrics["answer/em"] == 0.0 and job.data.metrics["cases/failure_rate"] == 1.0
