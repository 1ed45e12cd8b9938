"""The query side on the bundled samples: query=rules|multi_query|hyde, reranker=frequency, reranker
fallback and the per-stage trace, each a real job that ends FINISHED (LLM ones against the loopback
server), with every logged metric recomputed by ragbench.verify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragbench.query.transforms import MULTI_QUERY_PROMPT, parse_subqueries
from ragbench.verify import verify_rows
from tests.fixtures.components import _bucket
from tests.fixtures.jobs import run_job
from tests.fixtures.llm_server import LLMServer, default_reply

pytestmark = pytest.mark.slow
SMALL = ["dataset.sample_size=8", "llm=extractive"]


def reply(body: dict) -> str:
    """Sub-queries for a multi-query prompt, a passage for a HyDE prompt, else the default reply."""
    content = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    question = content.rsplit("Question:", 1)[-1].strip()
    if "search queries" in content:
        words = question.rstrip("?").split()
        return f"1. {' '.join(words[1:])}\n2. {' '.join(words[-3:])}\n3. {question}"
    if "hypothetical" in content or "Write a short passage" in content:
        return f"A passage answering: {question}"
    return default_reply(body)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "none")  # the loopback server needs no key; litellm wants one


@pytest.fixture(scope="module")
def server():
    with LLMServer(responder=reply) as srv:
        yield srv


def llm_query(kind: str, server: LLMServer) -> list[str]:
    return [f"query={kind}", f"query.transform.client.api_base={server.url}",
            "query.transform.client.model=openai/fixture", "query.transform.client.num_retries=0"]


def rows_of(client, run) -> list[dict]:
    path = client.download_artifacts(run.info.run_id, "cases.jsonl")
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def finished(run, client) -> list[dict]:
    assert run.info.status == "FINISHED", run.data.tags.get("ragbench.error")
    rows = rows_of(client, run)
    report = verify_rows(rows, run.data.metrics)
    assert report.ok, report.mismatches + report.unchecked
    return rows


def test_rules_with_frequency_and_trace(tmp_path: Path) -> None:
    run, client = run_job(["dataset=locomo", *SMALL, "query=rules", "reranker=frequency", "trace=true"], tmp_path)
    rows = finished(run, client)
    assert run.data.params["query.transform._target_"] == "ragbench.query.transforms.RuleExpansion"
    assert run.data.metrics["rerank/fallbacks"] == 0
    stages_seen = set()
    for row in rows:
        names = [st["stage"] for st in row["trace"]["stages"]]
        stages_seen.update(names)
        assert names[-4:] == ["retrieval", "rerank:FrequencyReranker", "topk", "expansion"]
        # the trace's retrieval stage is the fused ranking the case started from; topk is what it kept
        assert row["trace"]["stages"][-2]["ids"] == row["retrieved_ids"]
    assert any(n.startswith("query:1") for n in stages_seen)  # the rule sub-queries were searched


def test_multi_query_against_loopback_is_cached(tmp_path: Path, server: LLMServer) -> None:
    server.reset()
    run, client = run_job(["dataset=qasper", *SMALL, *llm_query("multi_query", server), "reranker=frequency",
                           "trace=true"], tmp_path)
    rows = finished(run, client)
    assert server.count > 0 and run.data.metrics["query/transform_failures"] == 0
    for r in rows:  # the question + the server's distinct lines (one repeats the question: not searched twice)
        asked = reply({"messages": [{"content": MULTI_QUERY_PROMPT.format(n=3, question=r["question"])}]})
        searched = [s for s in r["trace"]["stages"] if s["stage"].startswith("query:")]
        assert len(searched) == len(parse_subqueries(r["question"], asked, 3)) >= 2
    server.reset()
    again, _ = run_job(["dataset=qasper", *SMALL, *llm_query("multi_query", server), "reranker=frequency"],
                       tmp_path)
    assert again.info.status == "FINISHED" and server.count == 0  # sub-queries served from the LLM cache


def test_hyde_dense_finishes(tmp_path: Path, server: LLMServer) -> None:
    run, client = run_job(["dataset=qasper", *SMALL, *llm_query("hyde", server), "retrieval=dense"], tmp_path)
    finished(run, client)
    assert server.count > 0


def test_reranker_that_cannot_score_falls_back_and_is_counted(tmp_path: Path) -> None:
    run, client = run_job(["dataset=locomo", *SMALL, "reranker=none", "reranker.candidates=10",
                           "+reranker.rerankers.flaky._target_=tests.fixtures.components.FlakyReranker",
                           "+reranker.rerankers.flaky.fail_every=3"], tmp_path)
    rows = finished(run, client)
    failing = [r for r in rows if _bucket(r["qid"], 3) == 0]
    assert failing and run.data.metrics["rerank/fallbacks"] == len(failing)
    for row in failing:  # recorded per case; the case still ran and was scored
        assert row["status"] == "ok" and row["trace"]["rerank_fallback"][0]["reranker"] == "FlakyReranker"
    assert all("trace" not in r for r in rows if _bucket(r["qid"], 3) != 0)  # trace off: nothing else


def test_cross_encoder_without_weights_falls_back_when_asked(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # the default on_load_error=fail exits 1 in one line per job: tests/integration/test_faults.py
    run, client = run_job(["dataset=locomo", *SMALL, "retrieval=bm25", "reranker=cross_encoder",
                           "reranker.rerankers.cross_encoder.model=/nonexistent/path",
                           "reranker.rerankers.cross_encoder.on_load_error=fallback"], tmp_path)
    rows = finished(run, client)
    assert run.data.metrics["rerank/fallbacks"] == len(rows) == 8
    for row in rows:  # every case kept the order it was given, recorded
        (fb,) = row["trace"]["rerank_fallback"]
        assert fb["reranker"] == "CrossEncoderReranker" and "/nonexistent/path" in fb["error"]
    said = [r for r in caplog.records if "/nonexistent/path" in r.getMessage()]
    assert len(said) == 1 and "skipped" in said[0].getMessage()  # one warning, at preflight


def test_trace_locates_where_first_gold_was_lost_or_kept(tmp_path: Path) -> None:
    run, client = run_job(["dataset=locomo", *SMALL, "retrieval=hybrid", "reranker=diversity",
                           "reranker.rerankers.diversity.max_per_parent=1", "experiment=smoke"], tmp_path)
    rows = finished(run, client)
    matched = [r for r in rows if r["evidence"]["matched"]]
    assert matched and all(r["trace"]["stages"][0]["stage"] == "child:FaissRetriever" for r in rows)
    outcome: dict[str, int] = {}
    for row in matched:
        stages = row["trace"]["stages"]
        gold = set(row["qrels"]["chunk"])
        first = next((s["stage"] for s in stages if set(s["ids"]) & gold), None)
        assert row["trace"]["gold_entered"] == first
        if first is None:
            key = "trace/gold_never_retrieved"
        else:  # the first later main-line stage with no gold candidate (expansion: no context covers
            # evidence); child retrievers and variants are parallel branches, where gold may only enter
            after = [s for s in stages[[s["stage"] for s in stages].index(first) + 1:]
                     if not s["stage"].startswith(("child:", "query:"))]
            lost = next((s["stage"] for s in after if not (s["gold"] if s["stage"] == "expansion"
                                                               else set(s["ids"]) & gold)), None)
            assert row["trace"]["gold_lost"] == lost
            key = "trace/gold_kept" if lost is None else f"trace/gold_lost_at/{lost.split(':')[0]}"
        outcome[key] = outcome.get(key, 0) + 1
    for key, n in outcome.items():
        assert run.data.metrics[key] == n
    traced = [r["trace"] for r in rows if "gold_entered" in r.get("trace", {})]
    for field in ("gold_entered", "gold_lost"):  # the runs-table tag: the most frequent stage, recounted
        seen = [t[field] for t in traced if t[field] is not None]
        most = max(map(seen.count, seen), default=0)
        tops = {s for s in seen if seen.count(s) == most} or {"none"}  # a tie names the first seen
        assert run.data.tags[f"ragbench.trace.{field}_at"] in {f"{s} ({most} of {len(traced)} cases)" for s in tops}


def test_routing_by_gold_type(tmp_path: Path) -> None:
    run, client = run_job(["dataset=locomo", *SMALL, "retrieval.topk=2", "+routing.by_type.temporal.topk=5",
                           "+routing.by_type.temporal.parent_depth=0"], tmp_path)
    rows = finished(run, client)
    assert run.data.tags["ragbench.routing"].startswith("by gold question type")
    temporal = [r for r in rows if r["question_type"] == "temporal"]
    other = [r for r in rows if r["question_type"] != "temporal"]
    assert temporal and other
    assert any(len(r["contexts"]) > 2 for r in temporal) and all(len(r["contexts"]) <= 2 for r in other)
    # parent_depth=0 for temporal: its contexts are the hit sentences themselves
    assert all(c["chunk_id"] in r["ranked_ids"] for r in temporal for c in r["contexts"])


def test_easyrag_two_stage_preset_aggregates_to_paragraphs(tmp_path: Path) -> None:
    run, client = run_job(["dataset=qasper", *SMALL, "experiment=easyrag_two_stage",
                           "~reranker.rerankers.cross_encoder", "trace=true"], tmp_path)  # no CE weights offline
    rows = finished(run, client)
    for row in rows:
        names = [s["stage"] for s in row["trace"]["stages"]]
        assert names[-4:] == ["rerank:ParagraphAggregator", "rerank:MMRReranker", "topk", "expansion"]
        agg = row["trace"]["stages"][names.index("rerank:ParagraphAggregator")]
        # sentence ids end in .t<n> (paper#s0.p0.t1): after aggregation only paragraphs (paper#s0.p0) remain
        assert agg["ids"] and all(i.rsplit("#", 1)[1].split(".")[-1].startswith("p") for i in agg["ids"])
        assert len(agg["ids"]) <= 30
