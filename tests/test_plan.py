"""``plan=true`` on the design-card sweep: 6 jobs, 2 distinct ingests to build on a cold cache and 0 after
the sweep ran; no MLflow run, no torch (nor MLflow) imported, nothing sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CARD = ["-m", "retrieval.topk=3,5,10", "dataset=locomo,qasper"]
PROBE = """
import json, sys
from ragbench.plan.cli import make_plan
plan = make_plan(sys.argv[1:])
print(json.dumps({"plan": plan, "torch": "torch" in sys.modules, "mlflow": "mlflow" in sys.modules,
                  "litellm": "litellm" in sys.modules}))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _probe(tmp_path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, *CARD, f"cache.dir={tmp_path}/cache"], cwd=tmp_path,
                          env=_env(), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_plan_of_the_design_card_sweep_cold_then_after_the_sweep(tmp_path):
    cold = _probe(tmp_path)
    assert not cold["torch"] and not cold["mlflow"] and not cold["litellm"]
    plan = cold["plan"]
    assert plan["jobs"] == 6 and plan["ingests"] == 2 and plan["ingests_to_build"] == 2
    assert plan["totals"]["generation_calls"] == 0 and plan["totals"]["usd"] == 0.0  # extractive + lexical
    assert plan["wall_unknown"]  # no rate recorded yet: said so, not guessed
    cli = subprocess.run([sys.executable, "-m", "ragbench", *CARD, f"cache.dir={tmp_path}/cache", "plan=true",
                          f"plan.json={tmp_path}/plan.json"], cwd=tmp_path, env=_env(), capture_output=True,
                         text=True, timeout=300, check=False)
    assert cli.returncode == 0, cli.stderr[-3000:]
    assert "plan: 6 jobs, 2 distinct ingests (0 cached, 2 to build)" in cli.stdout
    assert json.loads((tmp_path / "plan.json").read_text())["jobs"] == 6
    assert not (tmp_path / "mlruns").exists() and not (tmp_path / "multirun").exists()  # no run, no sweep
    # the ingests depend on the corpus, not on the questions: a sweep over 2 questions per job fills them
    sweep = subprocess.run([sys.executable, "-m", "ragbench", *CARD, "dataset.max_queries=2",
                            f"cache.dir={tmp_path}/cache"], cwd=tmp_path, env=_env(), capture_output=True,
                           text=True, timeout=900, check=False)
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    warm = _probe(tmp_path)["plan"]
    assert warm["jobs"] == 6 and warm["ingests_cached"] == 2 and warm["ingests_to_build"] == 0
    assert not any("encode rate" in u for u in warm["wall_unknown"])  # the sweep recorded its encode rate
