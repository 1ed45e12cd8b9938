"""Multi-step retrieval on the bundled MultiHop-RAG sample (issue 42): query=decompose (LLM and rules),
retrieval.mode=iterative and adaptive, each a real job that ends FINISHED against the loopback LLM server,
with its hops in the case records and every logged metric (the per-hop ones included) recomputed by
ragbench.verify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragbench.verify import verify_rows
from tests.fixtures.jobs import run_job
from tests.fixtures.llm_server import LLMServer, default_reply

pytestmark = pytest.mark.slow
SMALL = ["dataset=multihop_rag", "dataset.max_queries=4", "retrieval=bm25"]


def reply(body: dict) -> str:
    """Two sub-questions for a decomposition prompt; one next query, then ENOUGH, for an iteration."""
    content = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    if "sub-questions" in content:
        question = content.rsplit("Question:", 1)[-1].strip()
        words = question.rstrip("?").split()
        half = len(words) // 2
        return f"1. {' '.join(words[:half])}?\n2. {' '.join(words[half:])}?"
    if "one search at a time" in content:
        return "ENOUGH" if "- Fernway robotics deal units" in content else "Fernway robotics deal units"
    if "Reply YES or NO" in content:
        return "NO" if "striker" in content else "YES"
    return default_reply(body)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "none")  # the loopback server needs no key; litellm wants one


@pytest.fixture(scope="module")
def server():
    with LLMServer(responder=reply) as srv:
        yield srv


def llm(server: LLMServer) -> list[str]:
    return ["llm=openai_compatible", "llm.model=openai/gen", f"llm.api_base={server.url}",
            "llm.num_retries=0"]


def finished(run, client, families: tuple[str, ...] = ("hop", "adaptive")) -> list[dict]:
    """The FINISHED run's case lines; verify recomputes its metrics, those of ``families`` all checked."""
    assert run.info.status == "FINISHED", run.data.tags.get("ragbench.error")
    path = client.download_artifacts(run.info.run_id, "cases.jsonl")
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    report = verify_rows(rows, run.data.metrics)
    assert report.ok, report.mismatches
    assert not [u for u in report.unchecked if any(f in u for f in families)], report.unchecked
    return rows


def test_llm_decompose_then_iterate(tmp_path: Path, server: LLMServer) -> None:
    run, client = run_job([*SMALL, *llm(server), "query=decompose",
                           f"query.transform.client.api_base={server.url}",
                           "query.transform.client.model=openai/fixture",
                           "query.transform.client.num_retries=0",
                           "retrieval.mode=iterative", "retrieval.max_hops=4"], tmp_path)
    rows = finished(run, client)
    for row in rows:
        hops = row["trace"]["hops"]
        assert [h["source"] for h in hops][:2] == ["decompose", "decompose"]
        assert hops[0]["query"] != row["question"] and hops[0]["tokens"] > 0  # the model's sub-question
        # a third hop came from the iteration (its next query), then the model said ENOUGH or max_hops
        assert hops[2]["source"] == "iterative" and hops[2]["query"] == "Fernway robotics deal units"
        assert 3 <= len(hops) <= 4 and row["retrieval/hop/used"] == len(hops)
    m = run.data.metrics
    assert 0 < m["retrieval/hop/coverage"] <= 1 and m["retrieval/hop/used"] >= 3
    assert "by_type/comparison_query/retrieval/hop/coverage" in m
    assert run.data.params["query.transform._target_"] == "ragbench.query.decompose.decomposer"


def test_rules_interleave_and_adaptive_judge(tmp_path: Path, server: LLMServer) -> None:
    run, client = run_job([*SMALL, *llm(server), "query=decompose", "query.decomposer=rules",
                           "query.merge=interleave", "retrieval.mode=adaptive"], tmp_path)
    rows = finished(run, client)
    closed = [r for r in rows if not r["trace"]["adaptive"]["retrieved"]]
    assert closed and all("striker" in r["question"] and r["context_ids"] == [] for r in closed)
    assert all(r["trace"]["hops"] == [] and r["retrieval/hop/used"] == 0 for r in closed)
    assert run.data.metrics["retrieval/adaptive/retrieved"] == pytest.approx(1 - len(closed) / len(rows))
    assert any(len(r["trace"]["hops"]) == 2 for r in rows)  # a comparison the rules split


def test_single_step_baseline_records_one_hop(tmp_path: Path) -> None:
    run, client = run_job([*SMALL, "stages=retrieval", "retrieval.mode=adaptive",
                           "retrieval.adaptive_threshold=-1e9"], tmp_path)
    rows = finished(run, client)
    assert all(r["trace"]["adaptive"]["retrieved"] and len(r["trace"]["hops"]) == 1 for r in rows)
    assert all(r["trace"]["hops"][0]["query"] == r["question"] for r in rows)
    assert run.data.metrics["retrieval/adaptive/retrieved"] == 1.0


def test_bad_mode_is_one_line(tmp_path: Path) -> None:
    from ragbench.errors import ConfigError

    with pytest.raises(ConfigError, match=r"retrieval.mode='loop' is not known"):
        run_job([*SMALL, "stages=retrieval", "retrieval.mode=loop"], tmp_path)


def test_an_outside_agent_s_trajectory_is_scored_hop_by_hop(tmp_path: Path) -> None:
    run, client = run_job(["dataset=multihop_rag", "dataset.max_queries=6", "system=python",
                           "system.target=examples.my_agent:answer"], tmp_path)
    rows = finished(run, client)
    assert all({h["source"] for h in r["trace"]["hops"]} == {"trajectory"} for r in rows)
    assert any(len(r["trace"]["hops"]) == 2 for r in rows)  # a comparison the agent searched twice
    m = run.data.metrics
    assert m["system/trajectory_steps"] == sum(len(r["trace"]["hops"]) for r in rows)
    assert m["system/trajectory_contexts_unmatched"] == 0 and 0 < m["retrieval/hop/coverage"] <= 1
