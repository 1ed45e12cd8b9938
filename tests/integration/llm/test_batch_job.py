"""``llm.batch=true`` on a real job against the stand-in batch API (tests/fixtures/batch_server): the same
answers and answer/judge metrics as the same job sent request by request, half the cost, one batch per
round (generation, then judging), a rerun that is a pure cache hit, and a job killed (-9) while its batch
is in progress that, run again with the same command, polls the recorded batch instead of sending it again.

The preflight request (one per client, at list price in both modes) is cached before each job, so each
job's ``cost/*`` is exactly the cost of its generation and judge requests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.batch_server import BatchServer

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
QUESTIONS = 4
# both priced in litellm's offline cost map, batch prices included (exactly half of the list prices)
GEN, JUDGE = "openai/gpt-4o-mini", "openai/gpt-4.1-nano"
SAME = ("answer/", "judge/", "retrieval/", "context/", "tokens/", "llm/generation_calls", "llm/judge_calls")


@pytest.fixture(scope="module")
def server():
    with BatchServer(polls_before_done=1) as s:
        yield s


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "none")  # the loopback server needs no key; litellm wants one


def _overrides(server: BatchServer, cache_dir: Path, *batch: str) -> list[str]:
    return ["dataset=locomo", f"dataset.sample_size={QUESTIONS}", "retrieval=bm25", f"cache.dir={cache_dir}",
            "llm=openai_compatible", f"llm.model={GEN}", f"llm.api_base={server.url}", "llm.max_concurrency=2",
            "judge=[lexical,llm]", f"judge.model={JUDGE}", f"judge.api_base={server.url}",
            "judge.metrics=[accuracy,faithfulness]", *batch]


BATCH = ("llm.batch=true", "llm.batch_poll_s=0.05")


def _job(overrides: list[str], tmp_path: Path) -> tuple[Any, dict[str, float], list[str]]:
    """One job in-process as ``ragbench.app`` runs it (preflight, pipeline, the ledger's accounting), its
    preflight replies cached first (so the job books only its cases' requests): (result, metrics, batch ids)."""
    from ragbench.budget import Budget, accounting_metrics
    from ragbench.build import build
    from ragbench.outcome import preflight
    from ragbench.pipeline import Pipeline
    from ragbench.session import LEDGER
    from tests.fixtures.jobs import compose_cfg

    components, cache = build(compose_cfg(overrides, tmp_path))
    preflight(components)  # its replies cached (every preflight reply is)
    LEDGER.start_job(Budget(scope="job"))
    before = LEDGER.snapshot()
    preflight(components)  # served by the cache: saved, not spent
    pipeline = Pipeline(components, cache=cache)
    result = pipeline.run()
    metrics = {**result.metrics, **accounting_metrics(before, LEDGER.snapshot())}
    return result, metrics, list(pipeline.batch_ids)


def _answers(result: Any) -> dict[str, str]:
    assert len(result.cases) == QUESTIONS and not any(c.failed or c.skipped for c in result.cases)
    return {c.query.qid: c.answer.text for c in result.cases}


def _same(metrics: dict[str, float], keys: tuple[str, ...] = SAME) -> dict[str, float]:
    """The metrics both modes must agree on (a cost is half, a latency differs)."""
    return {k: v for k, v in metrics.items() if k.startswith(keys) and not k.endswith("cost_usd")}


@pytest.fixture(scope="module")
def normal(server, tmp_path_factory):
    """The job sent request by request: (its metrics, its answers)."""
    os.environ.setdefault("OPENAI_API_KEY", "none")
    tmp = tmp_path_factory.mktemp("normal")
    server.reset()
    result, metrics, ids = _job(_overrides(server, tmp / "cache"), tmp)
    assert server.count == 2 + QUESTIONS * 3 and not ids  # preflights, an answer and two verdicts per case
    return metrics, _answers(result)


def test_a_batch_job_answers_and_scores_as_the_normal_job_at_half_the_cost(server, normal, tmp_path):
    n, answers = normal
    overrides = _overrides(server, tmp_path / "cache", *BATCH)
    server.reset()
    submitted = server.submitted
    result, m, ids = _job(overrides, tmp_path)
    assert server.submitted - submitted == 2  # one batch for the answers, one for the verdicts
    assert ids == [f"batch_{submitted + 1}", f"batch_{submitted + 2}"]
    assert sum(r.get("model") == GEN.split("/")[1] for r in server.requests) == 1 + QUESTIONS  # preflight
    assert _answers(result) == answers
    assert _same(m) == _same(n) and m["answer/f1"] == n["answer/f1"] and m["judge/accuracy"] == n["judge/accuracy"]
    assert m["llm/generation_calls"] == QUESTIONS and m["llm/judge_calls"] == 2 * QUESTIONS
    for key in ("cost/generation_usd", "cost/judge_usd", "cost/usd_total", "judge/cost_usd"):
        assert n[key] > 0 and m[key] == pytest.approx(n[key] / 2), key

    server.reset()  # the same job again: every answer and verdict is in the cache
    again, m2, ids2 = _job(overrides, tmp_path)
    assert server.submitted - submitted == 2 and server.count == 0 and not ids2
    assert m2["cost/usd_total"] == 0 and m2["saved/usd_total"] > 0
    scores = ("answer/", "judge/", "retrieval/", "context/")  # (the tokens were saved, not spent)
    assert _answers(again) == answers and _same(m2, scores) == _same(n, scores)


def test_a_job_killed_while_its_batch_runs_resumes_the_batch(server, normal, tmp_path):
    from mlflow import MlflowClient

    n, answers = normal
    cache_dir = tmp_path / "cache"
    db = tmp_path / "mlruns" / "mlflow.db"
    overrides = _overrides(server, cache_dir, *BATCH)
    from ragbench.build import build
    from ragbench.outcome import preflight
    from tests.fixtures.jobs import compose_cfg

    preflight(build(compose_cfg(overrides, tmp_path))[0])  # cached: the job's cost is its cases' requests alone
    args = [sys.executable, "-m", "ragbench", *overrides, f"tracking.uri=sqlite:///{db}",
            f"tracking.artifact_root={tmp_path / 'mlruns' / 'artifacts'}"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "none"}
    submitted = server.submitted
    server.polls_before_done = 10**9  # the batch stays in_progress until the test lets it finish
    try:
        proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        deadline = time.time() + 300
        records = cache_dir / "llm_batches"
        while time.time() < deadline and proc.poll() is None:
            if server.submitted > submitted and records.exists() and any(records.rglob("*.json")):
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
        assert server.submitted - submitted == 1
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        server.polls_before_done = 0
    again = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming batch" in again.stderr
    # the answers' batch was polled, not sent again: one more batch only, for the verdicts
    assert server.submitted - submitted == 2
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    runs = client.search_runs([client.get_experiment_by_name("ragbench").experiment_id],
                              filter_string="attributes.status = 'FINISHED'")
    assert len(runs) == 1
    m = runs[0].data.metrics  # (the run also logs what the tracker derives: curves, by type...)
    # the in-process job also reports 0 tokens for roles other tests in this worker process used (the
    # budget ledger lists every role it has seen); this subprocess job has only its own roles
    other_roles = {k for k in _same(n) if k not in m and k.startswith("tokens/") and n[k] == 0.0}
    assert {k: m.get(k) for k in _same(n) if k not in other_roles} == {k: v for k, v in _same(n).items()
                                                                       if k not in other_roles}
    assert m["cost/usd_total"] == pytest.approx(n["cost/usd_total"] / 2)
    assert runs[0].data.tags["ragbench.llm_batches"] == f"batch_{submitted + 1},batch_{submitted + 2}"
    folder = Path(client.download_artifacts(runs[0].info.run_id, ""))
    rows = [json.loads(line) for p in folder.rglob("cases.jsonl") for line in p.read_text().splitlines() if line]
    assert {r["qid"]: r["answer"] for r in rows} == answers
