"""log.per_query's line, from a case record (issue 44 item 4)."""

from __future__ import annotations

import dataclasses

from ragbench.record import CaseRecord
from ragbench.tracking.per_query import hit_rank, line

CASE = CaseRecord(
    qid="conv-26_q3", question_type="temporal", answerable=True, question="When?", gold="May", answer="In May",
    status="ok", error_type=None, error=None, retrieved_ids=["a", "b"], retrieved_scores=[0.9, 0.8],
    context_ids=["a"], context_parts=[[]], citations=[1], prompt_tokens=10, completion_tokens=2,
    scores={"retrieval/recall_at_5": 1.0, "retrieval/mrr_at_5": 0.5, "retrieval/mrr_at_10": 0.5,
            "retrieval/mrr_at_1": 0.0, "judge/accuracy": 4.0, "judge/accuracy/judge_failed": 0.0,
            "judge/cost_usd": 0.001, "judge/score": 0.75, "answer/f1": 2 / 3},
    latency_ms={"search": 12.0, "generate": 800.4}, fields={})


def test_the_line_reads_the_record():
    assert line(CASE, 5) == ("query conv-26_q3 type=temporal status=ok recall@5=1.00 hit_rank=2 "
                             "latency_ms=812 judge accuracy=4 f1=0.67")


def test_no_gold_found_no_judge_and_a_failed_case():
    case = dataclasses.replace(CASE, status="failed", error_type="LLMTimeoutError", latency_ms={},
                               scores={"retrieval/recall_at_3": 0.0, "retrieval/mrr_at_3": 0.0})
    assert line(case, 3) == "query conv-26_q3 type=temporal status=failed recall@3=0.00 hit_rank=- error=LLMTimeoutError"
    assert hit_rank({}) is None
    # no retrieval scores at all (an unanswerable question): no recall, no rank
    assert line(dataclasses.replace(CASE, scores={}, latency_ms={}), 5) == (
        "query conv-26_q3 type=temporal status=ok")
