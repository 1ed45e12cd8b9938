"""``repeats=3`` through real jobs against the loopback server sampling at temperature > 0 (its replies depend on
the seed each repeat sends): the record keeps 3 repeats per case, the repeat metrics are logged, verify
recomputes every repeat, a rerun sends no request (the repeat index is in the cache keys), and compare's report
shows each case's spread over its repeats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragbench.verify import main as verify
from tests.fixtures.jobs import python_module, run_job
from tests.fixtures.llm_server import LLMServer, seeded_reply

pytestmark = pytest.mark.slow
KEY_ENV = "RAGBENCH_REPEATS_IT_KEY"
N = 6


def _job(server: LLMServer, tmp_path: Path, *extra: str) -> list[str]:
    return ["dataset=locomo", f"dataset.sample_size={N}", "retrieval=bm25", f"cache.dir={tmp_path}/cache",
            "llm=openai_compatible", "llm.model=openai/gen-model", f"llm.api_base={server.url}",
            f"llm.api_key_env={KEY_ENV}", "llm.temperature=0.8", "llm.num_retries=0",
            "judge=[lexical,llm]", "judge.model=openai/judge-model", f"judge.api_base={server.url}",
            f"judge.api_key_env={KEY_ENV}", "judge.metrics=[accuracy]", "judge.temperature=0.8",
            "resume=false", *extra]


def _rows(client, run) -> list[dict]:
    path = client.download_artifacts(run.info.run_id, "cases.jsonl")
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def _generator_seeds(server: LLMServer) -> list[int | None]:
    return [r.get("seed") for r in server.requests if r.get("model") == "gen-model"
            and "Reply with the single word OK." not in json.dumps(r)]


def _plan(server: LLMServer, tmp_path: Path, name: str) -> dict:
    """``plan=true``'s totals for the repeats=3 job (a subprocess; it sends nothing)."""
    sent = server.count
    proc = python_module(["ragbench", *_job(server, tmp_path, "repeats=3"), "plan=true",
                          f"plan.json={tmp_path}/{name}.json"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert server.count == sent
    return json.loads((tmp_path / f"{name}.json").read_text())["totals"]


def test_repeats_record_metrics_verify_cache_and_report(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, "not-a-secret")
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    with LLMServer(responder=seeded_reply) as server:
        bill = _plan(server, tmp_path, "before")
        assert bill["generation_calls"] == 3 * N and bill["judge_calls"] == 3 * N  # plan=true bills every repeat
        run, client = run_job(_job(server, tmp_path, "repeats=3"), tmp_path)
        assert run.info.status == "FINISHED"
        seeds = _generator_seeds(server)
        assert sorted(seeds) == sorted([0, 1, 2] * N)  # each case asked once per repeat, seed 0 + r
        rows = _rows(client, run)
        assert len(rows) == N
        for row in rows:
            reps = row["repeats"]
            assert reps["reducer"] == "mean" and len(reps["runs"]) == 3
            f1 = [r["scores"]["answer/f1"] for r in reps["runs"]]
            assert row["answer/f1"] == pytest.approx(sum(f1) / 3)
            assert row["answer"] == reps["runs"][0]["answer"]
        assert any(len({r["answer"] for r in row["repeats"]["runs"]}) > 1 for row in rows)  # real spread
        m = run.data.metrics
        assert m["repeats/n"] == 3.0 and "repeats/var/answer/f1" in m and m["repeats/var/judge/accuracy"] > 0
        # the judge's 0/1 verdict: pass@3 (some repeat correct) >= its mean >= pass^3 (every repeat correct)
        assert m["repeats/pass_at_3/judge/accuracy"] >= m["repeats/pass_hat_3/judge/accuracy"]
        assert m["repeats/pass_at_3/judge/accuracy"] > m["repeats/pass_hat_3/judge/accuracy"]
        assert m["answer/f1"] == pytest.approx(sum(r["answer/f1"] for r in rows) / N)

        assert verify([run.info.run_id, "--tracking-uri", uri]) == 0
        assert "OK: every metric matches" in capsys.readouterr().out
        bill = _plan(server, tmp_path, "after")  # every repeat's answer and verdict is in the cache now
        assert bill["generation_calls"] == 0 and bill["judge_calls"] == 0 and bill["cached_calls"] >= 6 * N

        server.reset()  # a rerun: every repeat's answer and verdict from the cache, no request sent
        again, _ = run_job(_job(server, tmp_path, "repeats=3"), tmp_path)
        assert again.info.status == "FINISHED" and server.count == 0
        assert again.data.metrics["answer/f1"] == pytest.approx(m["answer/f1"])

        server.reset()  # repeats=1: no seed is sent, the cache keys are those of a job without repeats
        single, _ = run_job(_job(server, tmp_path, "repeats=1"), tmp_path)
        assert single.info.status == "FINISHED"
        assert set(_generator_seeds(server)) == {None} and "repeats/n" not in single.data.metrics
        assert "repeats" not in _rows(client, single)[0]

    out = tmp_path / "out"
    proc = python_module(["ragbench.compare", "--runs", run.info.run_id, single.info.run_id, "--baseline",
                          single.info.run_id, "--metric", "answer/f1", "--json", str(out / "cmp.json"),
                          "--report", str(out), "--tracking-uri", uri], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert '"rp":' in html and "spread over" in html  # per-case spread in the drill-down
    data = html[html.index('"rp":'):][:400]
    assert '"n": 3' in data or '"n":3' in data
    recs = json.loads((out / "cmp.json").read_text())["records"]
    rec = next(r for r in recs if r["run"] == run.info.run_id and r["metric"] == "answer/f1" and r["type"] == "all")
    assert rec["ci_low"] <= rec["delta"] <= rec["ci_high"]


def test_an_outside_system_is_asked_once_per_repeat_and_a_rerun_asks_none(tmp_path):
    job = ["dataset=qasper", "dataset.sample_size=4", "system=python", "system.target=examples.my_rag:answer",
           f"cache.dir={tmp_path}/cache", "resume=false", "repeats=3"]
    run, client = run_job(job, tmp_path)
    assert run.info.status == "FINISHED"
    assert run.data.metrics["llm/system_calls"] == 4 * 3  # the first ask (retrieval and answer), then 2 repeats
    rows = _rows(client, run)
    assert all(len(r["repeats"]["runs"]) == 3 for r in rows)
    again, _ = run_job(job, tmp_path)
    assert again.info.status == "FINISHED" and again.data.metrics.get("llm/system_calls", 0.0) == 0.0
