"""Real runs (``python -m ragbench``) against the loopback server:

- issue 45.1: a 3-job top-k sweep with an LLM generator and ``judge=[lexical,llm]`` sends every distinct
  request once, without a budget as with one (the judge's rubrics that do not show the contexts ask the
  same request in every job), and a rerun sends nothing;
- issue 45.3b: a budget stop while rewriting questions (``query=multi_query``) ends the job KILLED with
  exit 1, where it used to search the rest of the questions unrewritten and end FINISHED with exit 0;
- issue 47.8: the LLM judge's requests carry its verdict schema (``response_format``) to a self-hosted
  endpoint, and the run records it (param ``judge/structured_output``).

Run with ``-s`` to see the requests each sweep sent."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.fixtures.llm_server import LLMServer

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
N = 6


@pytest.fixture(scope="module")
def server():
    with LLMServer() as srv:
        yield srv


def _args(server: LLMServer, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "retrieval=bm25",
        f"dataset.sample_size={N}",
        f"cache.dir={tmp_path}/cache",
        f"tracking.uri=sqlite:///{tmp_path}/mlruns/mlflow.db",
        f"tracking.artifact_root={tmp_path}/mlruns/art",
        *extra,
    ]


LLM = [
    "llm=openai_compatible",
    "llm.model=openai/gen-model",
    "llm.max_concurrency=2",
    "judge=[lexical,llm]",
    "judge.model=openai/judge-model",
]


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "RAGBENCH_CACHE": str(tmp_path / "dl"),
        "OPENAI_API_KEY": "sk-test",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "HF_HUB_OFFLINE": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "ragbench", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _runs(tmp_path: Path) -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """(status, params, tags) of each job run (not a sweep's parent), oldest first."""
    with sqlite3.connect(tmp_path / "mlruns" / "mlflow.db") as db:
        rows = list(db.execute("select run_uuid, status from runs order by start_time"))
        out = []
        for run, status in rows:
            tags = dict(db.execute("select key, value from tags where run_uuid=?", (run,)))
            if tags.get("ragbench.role") == "job":
                out.append(
                    (status, dict(db.execute("select key, value from params where run_uuid=?", (run,))), tags)
                )
        return out


def _sweep(server: LLMServer, tmp_path: Path, *extra: str) -> Counter[str]:
    server.reset()
    tmp_path.mkdir(parents=True, exist_ok=True)
    urls = [f"llm.api_base={server.url}", f"judge.api_base={server.url}"]
    done = _run(["-m", "retrieval.topk=3,5,10", *_args(server, tmp_path, *LLM, *urls, *extra)], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return Counter(json.dumps(r, sort_keys=True) for r in server.requests)


def test_a_topk_sweep_sends_each_request_once_with_or_without_a_budget(server, tmp_path):
    free = _sweep(server, tmp_path / "free")
    capped = _sweep(server, tmp_path / "capped", "budget.max_calls=100000")
    print(f"\nrequests sent: {sum(free.values())} without a budget, {sum(capped.values())} with one")
    assert [b for b, n in free.items() if n > 1] == []  # nothing paid twice
    assert sum(free.values()) == sum(capped.values()) == len(capped)
    assert sum(free.values()) < 2 + 3 * N * 5  # the judge's context-free rubrics were asked once, not per job
    rerun = _sweep(server, tmp_path / "free", "resume=false")
    assert sum(rerun.values()) == 0


def test_a_budget_stop_while_rewriting_questions_ends_the_job_killed(server, tmp_path):
    server.reset()
    query = [
        "query=multi_query",
        "query.transform.client.model=openai/query-model",
        f"query.transform.client.api_base={server.url}",
        "query.transform.client.max_concurrency=1",
    ]
    stopped = _run(_args(server, tmp_path, *query, "budget.max_calls=3"), tmp_path)  # a preflight, 2 rewrites
    assert stopped.returncode == 1, stopped.stderr[-3000:]
    assert "stopped by budget while rewriting questions (query=multi_query)" in stopped.stderr
    assert "Traceback" not in stopped.stderr and server.count == 3
    [(status, _, _)] = _runs(tmp_path)
    assert status == "KILLED"  # a sweep resumed with a larger budget runs it again
    server.reset()
    done = _run(_args(server, tmp_path, *query, "budget.max_calls=100"), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert server.count == N - 2  # the two rewrites paid for are cached; the preflight too
    assert _runs(tmp_path)[-1][0] == "FINISHED"


def test_the_judge_asks_a_self_hosted_endpoint_for_its_verdict_schema(server, tmp_path):
    server.reset()
    urls = [f"llm.api_base={server.url}", f"judge.api_base={server.url}", "judge.metrics=[accuracy]"]
    done = _run(_args(server, tmp_path, *LLM, *urls), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    verdicts = [r for r in server.requests if r.get("model") == "judge-model" and len(r["messages"]) > 1]
    assert len(verdicts) == N
    for body in verdicts:
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["required"] == [
            "score",
            "reasoning",
        ]
    assert not any("response_format" in r for r in server.requests if r.get("model") == "gen-model")
    [(status, params, _)] = _runs(tmp_path)
    assert status == "FINISHED" and params["judge/structured_output"] == "json_schema"
