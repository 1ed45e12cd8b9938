"""Generation and judging through litellm against a real HTTP server on 127.0.0.1.

Proves: retries recover; exhausted retries raise the error class (and, in a real job, count as failed
cases while the job completes); the judge's regex fallback parses ``Score: 3``; a rerun is served
entirely from the cache (the server sees zero requests); an API key set in the environment appears
nowhere in logs, results, cache files, MLflow params/tags/metrics/artifacts or Hydra's log files.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ragbench.generate.llm import LLMGenerator
from ragbench.judge.llm import LLMJudge
from ragbench.llm.errors import LLMAuthError, LLMRateLimitError, LLMServerError, LLMTimeoutError
from ragbench.types import Context, Level, Query
from tests.fixtures.llm_server import LLMServer, Step

SECRET = "sk-ragbench-leak-canary-7f3a9c21"
ROOT = Path(__file__).resolve().parents[2]
QUERIES = [
    Query(
        qid=f"q{i}", text=f"Where did Mel go on day {i}?", answers=("the lake",), question_type="single_hop"
    )
    for i in range(4)
]
CTX = (
    Context(
        chunk_id="c1", text="Mel went to the lake.", title="Session 1", level=Level.PARAGRAPH, hit_ids=("c1",)
    ),
)


@pytest.fixture(scope="module")
def server():
    with LLMServer() as srv:
        yield srv


@pytest.fixture()
def llm_server(server):
    server.reset()
    server.delay_s = 0.0
    yield server
    server.reset()


@pytest.fixture(autouse=True)
def _secret(monkeypatch):
    monkeypatch.setenv("RAGBENCH_IT_KEY", SECRET)


def _generator(server, cache_dir, **kw):
    args = {
        "model": "openai/gen-model",
        "api_base": server.url,
        "api_key_env": "RAGBENCH_IT_KEY",
        "num_retries": 2,
        "backoff_s": 0.01,
        "timeout": 0.5,
        "dataset": "locomo",
    }
    return LLMGenerator(**{**args, **kw})


def _judge(server, cache_dir, **kw):
    args = {
        "model": "openai/judge-model",
        "api_base": server.url,
        "api_key_env": "RAGBENCH_IT_KEY",
        "num_retries": 1,
        "backoff_s": 0.01,
        "timeout": 2.0,
        "dataset": "qasper",
        "generator_model": "openai/gen-model",
    }
    return LLMJudge(**{**args, **kw})


@pytest.mark.parametrize(
    "fault", [Step(status=429), Step(status=500), Step(delay_s=1.5)], ids=["429", "500", "stall"]
)
def test_retries_recover(llm_server, tmp_path, fault):
    llm_server.script(fault, Step(text="the lake [ref_1]"))
    answer = _generator(llm_server, tmp_path).answer(QUERIES[0], CTX)
    assert answer.text == "the lake" and answer.citations == (1,)
    assert llm_server.count == 2  # the fault, then the retry that succeeded


@pytest.mark.parametrize(
    "fault,error",
    [
        (Step(status=429), LLMRateLimitError),
        (Step(status=500), LLMServerError),
        (Step(delay_s=1.5), LLMTimeoutError),
    ],
    ids=["429", "500", "stall"],
)
def test_exhausted_retries_raise_the_error_class(llm_server, tmp_path, fault, error):
    llm_server.script(fault, fault, fault)
    with pytest.raises(error, match=r"after 3 attempt\(s\)") as info:
        _generator(llm_server, tmp_path).answer(QUERIES[0], CTX)
    assert llm_server.count == 3  # num_retries=2 -> 3 attempts, no more
    assert "openai/gen-model" in str(info.value) and "fix:" in str(info.value)


def test_judge_fallback_parses_a_bare_score_line(llm_server, tmp_path):
    answer = _generator(llm_server, tmp_path).answer(QUERIES[0], CTX)
    llm_server.script(
        Step(text="Score: 3"), Step(text='{"score": 4, "reasoning": "ok"'), Step(text="not a verdict")
    )
    judge = _judge(llm_server, tmp_path, metrics=["accuracy", "correctness", "relevance"])
    out = judge.judge(QUERIES[0], CTX, answer)
    assert out["judge/score"] == 3.0 and out["judge/accuracy"] == 0.75
    assert out["judge/correctness"] == 1.0  # malformed JSON, rescued by the "score": N pattern
    assert "judge/relevance" not in out and out["judge/judge_failed"] == 1.0


def test_api_key_appears_nowhere_the_client_writes(llm_server, tmp_path, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    for name in ("LiteLLM", "ragbench", "openai", "httpx", "httpcore"):
        caplog.set_level(logging.DEBUG, logger=name)
    gen, judge = _generator(llm_server, tmp_path), _judge(llm_server, tmp_path)
    answer = gen.answer(QUERIES[0], CTX)
    verdict = judge.judge(QUERIES[0], CTX, answer)
    gen.answer(QUERIES[0], CTX)  # asked again (answers are cached as the case runner's stage records)
    llm_server.script(Step(status=401))
    with pytest.raises(LLMAuthError) as auth:
        gen.answer(QUERIES[1], CTX)
    llm_server.script(*[Step(status=500)] * 3)
    with pytest.raises(LLMServerError) as server_error:
        gen.answer(QUERIES[2], CTX)
    assert llm_server.auth_headers[0] == f"Bearer {SECRET}"  # the key was really used ...
    out = capsys.readouterr()
    written = [
        caplog.text,
        out.out,
        out.err,
        repr(answer),
        repr(verdict),
        str(auth.value),
        repr(auth.value),
        str(server_error.value),
        repr(gen.log_params()),
        repr(judge.log_params()),
        repr(judge.log_tags()),
        repr(gen.client),
        repr(vars(gen)),
        repr(vars(judge)),
    ]
    written += [p.read_text() for p in tmp_path.rglob("*") if p.is_file()]
    for text in written:  # ... and is in none of these
        assert SECRET not in text


# ------------------------------------------------------------------ a real job, through Hydra and MLflow
def _job(server, tmp_path: Path, name: str, *extra: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "RAGBENCH_IT_KEY": SECRET,
        "RAGBENCH_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    store = tmp_path / "mlruns"
    cmd = [
        sys.executable,
        "-m",
        "ragbench",
        "retrieval=bm25",
        "dataset.sample_size=6",
        "llm=openai_compatible",
        "llm.model=openai/gen-model",
        f"llm.api_base={server.url}",
        "llm.api_key_env=RAGBENCH_IT_KEY",
        "llm.num_retries=1",
        "llm.backoff_s=0.01",
        "llm.max_concurrency=4",
        "judge=[lexical,llm]",
        "judge.model=openai/judge-model",
        f"judge.api_base={server.url}",
        "judge.api_key_env=RAGBENCH_IT_KEY",
        f"tracking.uri=sqlite:///{store}/mlflow.db",
        f"tracking.artifact_root={store}/artifacts",
        f"hydra.run.dir={tmp_path}/outputs/{name}",
        *extra,
    ]
    return subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _metrics(tmp_path: Path) -> list[dict[str, float]]:
    with sqlite3.connect(tmp_path / "mlruns" / "mlflow.db") as db:
        runs = [r for (r,) in db.execute("select run_uuid from runs order by start_time")]
        return [
            dict(db.execute("select key, value from latest_metrics where run_uuid=?", (r,))) for r in runs
        ]


@pytest.mark.slow
def test_job_end_to_end_failures_counted_and_key_never_logged(server, tmp_path):
    server.reset()
    ok = _job(server, tmp_path, "ok")
    assert ok.returncode == 0, ok.stderr[-3000:]
    calls = server.count
    assert calls == 2 + 6 * 5  # the generator's and the judge's preflight, six answers, four rubrics each
    server.reset()
    server.script(*[Step(status=500)] * 200)
    # another generator model: nothing cached for it; its preflight fails, the job fails once, up front
    failing = _job(server, tmp_path, "failing", "llm.model=openai/other-gen-model")
    assert failing.returncode == 1, failing.stderr[-3000:]
    assert server.count == 2  # the preflight: the first attempt and one retry (llm.num_retries=1)
    assert {r["model"] for r in server.requests} == {"other-gen-model"}
    first, second = _metrics(tmp_path)
    assert first["cases/failed"] == 0 and first["judge/score"] == 4.0 and first["judge/judge_failed"] == 0.0
    assert first["tokens/prompt_total"] > 0 and "latency/generate_p95_ms" in first
    assert second["answer/f1"] == 0.0 and second["judge/accuracy"] == 0.0 and "cases/failed" not in second
    server.reset()
    again = _job(server, tmp_path, "rerun")  # same config as the first job: all from cache
    assert again.returncode == 0 and server.count == 0
    cache = tmp_path / "cache"
    records = {stage: len(list((cache / stage).rglob("*.json"))) for stage in ("answers", "verdicts", "llm")}
    # each answer and verdict stored once as a stage record, and every reply paid for as a reply record
    # (issue 45.1): the 2 preflights, 6 answers and 6 x 4 verdicts of the first job (the failing
    # generator's stored nothing)
    assert records == {"answers": 6, "verdicts": 6, "llm": 2 + 6 + 6 * 4}
    assert {json.loads(p.read_text())["manifest"]["kind"] for p in (cache / "llm").rglob("*.json")} == {"chat"}
    texts = [ok.stdout, ok.stderr, failing.stdout, failing.stderr, again.stdout, again.stderr]
    blobs = [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()]
    assert any(b"LLMServerError: preflight request" in b for b in blobs)  # the failure class was recorded
    assert all(SECRET not in t for t in texts)
    assert all(SECRET.encode() not in b for b in blobs)  # mlflow.db, artifacts, Hydra logs, cache
