"""ragbench.verify on a toy job's case records: every metric reproduced, any tampering caught."""

from __future__ import annotations

import json

import pytest

from ragbench.judge.lexical import LexicalJudge
from ragbench.pipeline import Pipeline
from ragbench.record import case_record
from ragbench.retrieval.bm25 import BM25Retriever
from ragbench.retrieval.dense import FaissRetriever
from ragbench.tracking.mlflow_tracker import mlflow_name
from ragbench.verify import UsageError, verify_rows
from tests.fixtures.toy import toy_components


def job(scope: str = "corpus", retriever=None):
    comps = toy_components(retriever=retriever or FaissRetriever(), judges={"lexical": LexicalJudge(dataset="toy")},
                           scope=scope)
    result = Pipeline(comps).run()
    rows = [json.loads(json.dumps(case_record(c, result.tree, result.evidence.get(c.query.qid),
                                                                   dataset="toy", topk=2).row(), default=str))
            for c in result.cases]
    return rows, {mlflow_name(k): v for k, v in result.metrics.items()}


@pytest.mark.parametrize("scope,retriever", [("corpus", None), ("document", None), ("document", BM25Retriever())])
def test_every_metric_is_reproduced(scope, retriever):
    rows, logged = job(scope, retriever)
    report = verify_rows(rows, logged)
    assert report.ok, report.mismatches + report.unchecked
    assert report.worst[0] <= 1e-9 and report.compared > 50
    if retriever is None:  # dense ranks every chunk: the record goes down to the deepest cut-off, past top-k
        assert max(len(r["ranked_ids"]) for r in rows) > 2


def tamper_score(rows, logged):
    rows[0]["retrieval/ndcg_at_5"] += 0.25


def tamper_qrels(rows, logged):
    rows[1]["qrels"]["unit"] = {}


def tamper_context(rows, logged):
    rows[0]["contexts"][0]["text"] = "something else entirely"


def tamper_metric(rows, logged):
    logged["answer/f1"] += 1e-6


def drop_metric(rows, logged):
    del logged["retrieval/mrr_at_10"]


def unknown_metric(rows, logged):
    logged["answer/made_up"] = 0.5


@pytest.mark.parametrize("tamper,needle", [
    (tamper_score, "case q1 retrieval/ndcg_at_5"), (tamper_qrels, "case q2 retrieval/"),
    (tamper_context, "case q1 context/"), (tamper_metric, "run metric answer/f1"),
    (drop_metric, "run metric retrieval/mrr_at_10: recomputed but not logged"),
    (unknown_metric, "run metric answer/made_up: logged but not recomputable"),
])
def test_tampering_is_caught(tamper, needle):
    rows, logged = job()
    tamper(rows, logged)
    report = verify_rows(rows, logged)
    assert not report.ok
    assert any(line.startswith(needle) for line in report.mismatches + report.unchecked)


def test_rows_without_a_case_record_are_a_usage_error():
    rows, logged = job()
    del rows[0]["record_version"]
    with pytest.raises(UsageError, match="case q1 has no case record"):
        verify_rows(rows, logged)
