"""Issues 15 and 27 against the loopback server: the plan's prediction, complete accounting (generation,
judge and query-rewriting calls and tokens logged = what the server counted, per role; a rerun all saved,
nothing spent), the budget stop (exactly N requests at max_concurrency 8 with every first attempt refused
and retried, the rest skipped; a larger budget sends exactly the rest) and a sweep budget."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.llm_server import LLMServer, Step

ROOT = Path(__file__).resolve().parents[2]
N = 6


@pytest.fixture(scope="module")
def server():
    with LLMServer() as srv:
        yield srv


def _args(server: LLMServer, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "retrieval=bm25", f"dataset.sample_size={N}", "llm=openai_compatible", "llm.model=openai/gen-model",
        f"llm.api_base={server.url}", "llm.num_retries=0", "llm.max_concurrency=1",
        "judge=[lexical,llm]", "judge.model=openai/judge-model", f"judge.api_base={server.url}",
        "judge.metrics=[accuracy]", f"cache.dir={tmp_path}/cache",
        f"tracking.uri=sqlite:///{tmp_path}/mlruns/mlflow.db", f"tracking.artifact_root={tmp_path}/mlruns/artifacts",
        *extra,
    ]


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAGBENCH_CACHE": str(tmp_path / "dl"), "OPENAI_API_KEY": "sk-test",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "ragbench", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600, check=False)


def _runs(tmp_path: Path) -> list[tuple[str, str, dict[str, float], dict[str, str]]]:
    with sqlite3.connect(tmp_path / "mlruns" / "mlflow.db") as db:
        rows = list(db.execute("select run_uuid, status from runs order by start_time"))
        return [(r, s, dict(db.execute("select key, value from latest_metrics where run_uuid=?", (r,))),
                 dict(db.execute("select key, value from tags where run_uuid=?", (r,)))) for r, s in rows]


def _bodies(server: LLMServer) -> list[str]:
    return [json.dumps(r, sort_keys=True) for r in server.requests]


def _first_attempt_refused(server: LLMServer) -> None:
    """Each distinct request is refused (429) on its odd attempts and answered on the even ones."""
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def rule(body: dict[str, Any]) -> Step | None:
        key = json.dumps(body, sort_keys=True)
        with lock:
            seen[key] += 1
            return Step(status=429) if seen[key] % 2 else None

    server.rule = rule


QUERY = ["query=multi_query", "query.transform.client.model=openai/query-model"]


def test_accounting_matches_the_server_and_a_rerun_is_all_saved_and_the_plan_is_close(server, tmp_path):
    server.reset()
    query = [*QUERY, f"query.transform.client.api_base={server.url}"]
    plan = _run([*_args(server, tmp_path, *query), "plan=true", f"plan.json={tmp_path}/plan.json"], tmp_path)
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert server.count == 0 and not (tmp_path / "mlruns").exists()  # the plan sent nothing, made no run
    predicted = json.loads((tmp_path / "plan.json").read_text())
    first = _run(_args(server, tmp_path, *query), tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    [(_, status, m, _)] = _runs(tmp_path)
    assert status == "FINISHED"
    # every request of every role, preflights too
    assert m["tokens/generation_total"] + m["tokens/judge_total"] + m["tokens/query_total"] == server.tokens
    assert m["llm/calls_total"] == server.count
    sent = Counter(r.get("model") for r in server.requests)
    assert (m["llm/generation_calls"], m["llm/judge_calls"], m["llm/query_calls"]) == (
        sent["gen-model"], sent["judge-model"], sent["query-model"]) == (1 + N, 1 + N, 1 + N)
    assert m["tokens/total"] == server.tokens and m["saved/tokens_total"] == 0
    ratio = predicted["totals"]["tokens"] / server.tokens
    print(f"plan predicted {predicted['totals']['tokens']} tokens, server counted {server.tokens}: ratio {ratio:.3f}")
    assert 0.75 <= ratio <= 1.25
    assert predicted["totals"]["generation_calls"] == N and predicted["totals"]["judge_calls"] == N
    assert predicted["totals"]["query_calls"] == N
    spent = server.tokens
    server.reset()
    again = _run(_args(server, tmp_path, *query), tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert server.count == 0
    m2 = _runs(tmp_path)[-1][2]
    assert m2["tokens/total"] == 0 and m2["cost/usd_total"] == 0 and m2["llm/calls_total"] == 0
    assert m2["saved/tokens_total"] == spent  # the answers and verdicts (and preflights) all served by caches
    replan = _run([*_args(server, tmp_path, *query), "plan=true", f"plan.json={tmp_path}/plan2.json"], tmp_path)
    assert replan.returncode == 0, replan.stderr[-3000:]
    totals = json.loads((tmp_path / "plan2.json").read_text())["totals"]
    assert totals["generation_calls"] == 0 and totals["judge_calls"] == 0 and totals["query_calls"] == 0
    assert totals["cached_calls"] == 3 * N


def test_a_budget_of_n_calls_sends_exactly_n_then_a_larger_budget_sends_exactly_the_rest(server, tmp_path):
    server.reset()
    _first_attempt_refused(server)  # every request is two HTTP requests: a 429, then the retry answered
    fast = ["llm.max_concurrency=8", "llm.num_retries=2", "judge.max_concurrency=8",
            "judge.metrics=[accuracy,faithfulness]"]
    whole = 2 * (2 + 3 * N)  # 2 preflights, per question an answer and 2 judge metrics
    budget = 15
    stopped = _run(_args(server, tmp_path, *fast, f"budget.max_calls={budget}"), tmp_path)
    assert stopped.returncode == 1
    assert f"budget.max_calls={budget} reached ({budget} LLM requests sent" in stopped.stderr
    assert "Traceback" not in stopped.stderr
    assert server.count == budget
    [(_, status, m, tags)] = _runs(tmp_path)
    assert status == "KILLED" and f"budget.max_calls={budget}" in tags["ragbench.stopped_by_budget"]
    assert m["llm/calls_total"] == budget
    assert m["cases/skipped"] > 0 and m["cases/failed"] == 0
    assert m["cases/total"] + m["cases/skipped"] == N
    server.requests.clear()  # the rule keeps its counts: a request refused once is answered next time
    done = _run(_args(server, tmp_path, *fast, "budget.max_calls=100"), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    _, status, m, _ = _runs(tmp_path)[-1]
    assert status == "FINISHED" and m["cases/skipped"] == 0 and m["cases/total"] == N
    assert server.count == whole - budget == m["llm/calls_total"]  # what was paid for is not asked again


def test_a_sweep_budget_stops_the_remaining_jobs_and_exits_non_zero(server, tmp_path):
    server.reset()
    proc = _run(["-m", *_args(server, tmp_path, "budget.max_calls=4", "retrieval.topk=3,5,10")], tmp_path)
    assert proc.returncode == 1
    assert server.count <= 4
    jobs = [r for r in _runs(tmp_path) if r[3].get("ragbench.role") == "job"]
    assert len(jobs) == 1  # the two later jobs were not started
    assert "sweep stopped by budget: budget.max_calls=4 reached" in proc.stderr and "1 of 3 jobs ran" in proc.stderr
    parent = [r for r in _runs(tmp_path) if r[3].get("ragbench.role") == "sweep"][0]
    assert parent[2]["llm/calls_total"] == jobs[0][2]["llm/calls_total"]  # accounting summed on the parent


def test_rejudging_with_another_judge_reuses_every_cached_answer(server, tmp_path):
    server.reset()
    first = _run(_args(server, tmp_path), tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    server.reset()
    other = _run(_args(server, tmp_path, "judge.model=openai/judge-b"), tmp_path)
    assert other.returncode == 0, other.stderr[-3000:]
    models = [r.get("model") for r in server.requests]
    assert models and set(models) == {"judge-b"}, models  # no generation request: every answer came from the cache
    m = _runs(tmp_path)[-1][2]
    assert m["llm/generation_calls"] == 0 and m["saved/generation_calls"] >= N and m["llm/judge_calls"] == len(models)
