"""Real jobs (a subprocess each) against the loopback server answering as a small model does (issue 47): a
rubric whose every reply restates the answer is not logged, the summary prints "not judged" beside its
coverage, an OpenAI-compatible model's cost is tagged unpriced, and a failure rate at the limit says so."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.llm_server import LLMServer, Step, default_reply

ROOT = Path(__file__).resolve().parents[3]
N = 6


@pytest.fixture(scope="module")
def server():
    with LLMServer() as srv:
        yield srv


def _small_model(body: dict[str, Any]) -> str:
    """Accuracy in fenced JSON, every other rubric restated (SmolLM2's habit), answers as the fixture does."""
    user = str(body["messages"][-1]["content"])
    if "Several acceptable gold answers" in user or "Grade the generated answer" in user:
        return 'Here is my grade:\n```json\n{"score": 4, "reasoning": "same"}\n```'
    if '"score"' in user:
        return "The generated answer says the Louvre is in Paris, which is what the passages say."
    return default_reply(body)


def _job(server: LLMServer, tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict, dict]:
    args = ["retrieval=bm25", "dataset=qasper", f"dataset.sample_size={N}", "llm=openai_compatible",
            "llm.model=openai/gen-model", f"llm.api_base={server.url}", "llm.num_retries=0",
            "llm.max_concurrency=1", f"cache.dir={tmp_path}/cache",
            f"tracking.uri=sqlite:///{tmp_path}/mlruns/mlflow.db",
            f"tracking.artifact_root={tmp_path}/mlruns/artifacts", *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAGBENCH_CACHE": str(tmp_path / "dl"), "OPENAI_API_KEY": "sk-t",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1",
           "COLUMNS": "80"}
    proc = subprocess.run([sys.executable, "-m", "ragbench", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    with sqlite3.connect(tmp_path / "mlruns" / "mlflow.db") as db:
        (run,) = [r for (r,) in db.execute("select run_uuid from runs")]
        metrics = dict(db.execute("select key, value from latest_metrics where run_uuid=?", (run,)))
        tags = dict(db.execute("select key, value from tags where run_uuid=?", (run,)))
    return proc, metrics, tags


def test_a_rubric_no_reply_of_which_parses_is_not_logged_and_reads_not_judged(server, tmp_path):
    server.reset()
    server.responder = _small_model
    proc, metrics, tags = _job(server, tmp_path, "judge=[lexical,llm]", "judge.model=openai/judge-model",
                               f"judge.api_base={server.url}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert metrics["judge/accuracy"] == 1.0 and metrics["judge/accuracy/judge_failed"] == 0.0  # fenced JSON read
    for rubric in ("correctness", "faithfulness", "relevance"):
        assert f"judge/{rubric}" not in metrics and f"judge/{rubric}_successful" not in metrics  # not 0
        assert metrics[f"judge/{rubric}/judge_failed"] == 1.0
    assert metrics["judge/coverage"] == 0.0 and metrics["answer/f1"] > 0
    assert tags["ragbench.cost_basis"] == "unpriced"  # an OpenAI-compatible server's model has no price
    table = proc.stdout[proc.stdout.index("LLM judges"):]
    lines = {line.split("│")[1].strip(): line for line in table.splitlines() if line.count("│") >= 4}
    assert "100%" in lines["judge/accuracy"]
    assert "not judged" in lines["judge/correctness"] and "0.0000" not in lines["judge/correctness"]


def test_a_failure_rate_at_the_limit_says_so_in_the_last_line(server, tmp_path):
    """3 of 6 answers fail (as 3 of 6 timed out behind llama-server's queue): exit 0, and the last line says
    the rate is at max_failure_rate, not silently."""
    server.reset()
    server.responder = default_reply
    failed: set[str] = set()
    lock = threading.Lock()

    def rule(body: dict[str, Any]) -> Step | None:
        text = str(body["messages"][-1]["content"])
        if "single word OK" in text:
            return None  # the preflight
        with lock:
            if text in failed or len(failed) < 3:
                failed.add(text)
                return Step(status=500)
        return None

    server.rule = rule
    try:
        proc, metrics, _ = _job(server, tmp_path, "max_failure_rate=0.5")
    finally:
        server.rule = None
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert metrics["cases/failed"] == 3 and metrics["cases/failure_rate"] == 0.5
    last = [line for line in proc.stderr.splitlines() if line.strip()][-1]
    assert "3 of 6 cases failed: failure rate 0.500 = max_failure_rate=0.5, at the limit" in last
