"""query=contextualize with query.transform.method=llm in a real job against the loopback OpenAI-compatible
server (issue 41 item 2): each later turn of the bundled MTRAG sample is rewritten from its history, the
rewrite is what is searched, and a rerun pays no request (the replies are cached)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.jobs import run_job
from tests.fixtures.llm_server import LLMServer

pytestmark = pytest.mark.slow


def rewrite(body: dict) -> str:
    """A standalone query: the last message, prefixed with the first user message of the history."""
    content = body["messages"][-1]["content"]
    if "Conversation:\n" not in content:  # the job's preflight request, before the first case
        return "ok"
    history = content.split("Conversation:\n", 1)[1].split("\n\nLast message:", 1)[0]
    first = next(line for line in history.splitlines() if line.startswith("User: "))[len("User: "):]
    return f"{first} {content.rsplit('Last message: ', 1)[1]}"


def test_llm_rewrites_each_later_turn_from_its_history(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "none")  # the loopback server needs no key; litellm wants one
    args = ["dataset=mtrag", "stages=retrieval", "retrieval=bm25", "query=contextualize",
            "query.transform.method=llm", "query.transform.client.model=openai/rewriter",
            "query.transform.client.num_retries=0", f"cache.dir={tmp_path / 'cache'}"]
    with LLMServer(responder=rewrite) as server:
        run, client = run_job([*args, f"query.transform.client.api_base={server.url}"], tmp_path / "a")
        assert run.info.status == "FINISHED", run.data.tags.get("ragbench.error")
        path = client.download_artifacts(run.info.run_id, "cases.jsonl", str(tmp_path / "dl"))
        rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        later = [r for r in rows if int(r["turn"]) > 1]
        prompts = [b["messages"][-1]["content"] for b in server.requests]
        rewrites = [p for p in prompts if "Conversation:\n" in p]
        assert later and len(rewrites) == len(later)  # one rewrite per turn with a history, none for a first turn
        assert all("Conversation:\nUser: " in p and "Last message: " in p for p in rewrites)
        assert run.data.metrics["query/transform_failures"] == 0
        assert run.data.params["query.transform.method"] == "llm"
        assert run.data.params["query.transform.client.model"] == "openai/rewriter"
        sent = len(rewrites)
        again, _ = run_job([*args, f"query.transform.client.api_base={server.url}", "resume=false"],
                           tmp_path / "b")
        prompts = [b["messages"][-1]["content"] for b in server.requests]
        assert again.info.status == "FINISHED"
        assert len([p for p in prompts if "Conversation:\n" in p]) == sent  # every rewrite from the cache
        scores = [{k: v for k, v in r.data.metrics.items()
                   if k.startswith(("retrieval/", "by_turn/")) and "latency" not in k}
                  for r in (run, again)]
        assert scores[0] and scores[0] == scores[1]  # the same rewrites searched: the same figures
