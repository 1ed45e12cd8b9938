"""The issue's sweep as one command in a subprocess: ``query=none,multi_query reranker=none,frequency``
(multi_query against the loopback server), 4 jobs, all FINISHED, the query side logged as params."""

from __future__ import annotations

import pytest

from tests.fixtures.llm_server import LLMServer
from tests.integration.test_query_side import reply
from tests.test_sweeps import ragbench, runs

pytestmark = pytest.mark.slow


def test_query_by_reranker_sweep(tmp_path, monkeypatch):
    with LLMServer(responder=reply) as server:
        monkeypatch.setenv("RAGBENCH_QUERY_API_BASE", server.url)  # multi_query's endpoint (conf/query)
        monkeypatch.setenv("OPENAI_API_KEY", "none")
        proc = ragbench(["-m", "query=none,multi_query", "reranker=none,frequency", "dataset=locomo",
                         "dataset.sample_size=6", f"cache.dir={tmp_path}/cache"], tmp_path)
        asked = server.count
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, all_runs = runs(tmp_path)
    children = [r for r in all_runs if r.data.tags.get("ragbench.role") == "job"]
    assert len(children) == 4 and all(c.info.status == "FINISHED" for c in children)
    combos = {(c.data.params["query.transform._target_"].rsplit(".", 1)[1],
               c.data.params["reranker.candidates"]) for c in children}
    assert combos == {("NoQueryTransform", "0"), ("NoQueryTransform", "20"), ("MultiQuery", "0"), ("MultiQuery", "20")}
    assert asked > 0  # the sub-queries came from the server (once: the second multi_query job reads the cache)
    assert all(c.data.metrics["rerank/fallbacks"] == 0 for c in children)
