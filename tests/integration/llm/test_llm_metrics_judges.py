"""ReferenceFreeJudge and ClaimJudge against the loopback server with scripted replies: hand-worked
scores, malformed replies asked again and then counted as judge failures, requests as ``prompts`` lists."""

from __future__ import annotations

import json
import re

import pytest

from ragbench.judge.claims import ClaimJudge
from ragbench.judge.reference_free import ReferenceFreeJudge
from ragbench.protocols import ExplainingJudge, PromptedJudge
from ragbench.types import Answer, Context, Level, Query
from tests.fixtures.llm_server import Step

Q = Query(qid="q1", text="What is the capital of France and its population?",
          answers=("Paris is the capital of France. It has 2 million people.",), question_type="multi_hop")
CTX = tuple(Context(chunk_id=f"c{i}", text=t, title=f"doc {i}", level=Level.PARAGRAPH, hit_ids=())
            for i, t in enumerate(["Paris is the capital of France and its largest city. GRADE2",
                                   "France borders Spain. GRADE0", "Paris hosts many museums. GRADE1"]))
ANS = Answer(text="Paris is the capital of France. Paris has 9 million people.", model="openai/gen")
_TAG = {name: re.compile(rf"<{name}[^>]*>(.*?)</{name}>", re.DOTALL) for name in ("passage", "answer", "claim", "reference")}


def scripted(body):
    """Grades from GRADE<n> in the passage; claims = the answer's sentences; a claim is supported when the
    reference text contains it (case-insensitive); answer relevance 3."""
    text = body["messages"][-1]["content"]
    if "How relevant is the passage" in text:
        grade = int(re.search(r"GRADE(\d)", _TAG["passage"].search(text).group(1)).group(1))
        return Step(text=json.dumps({"score": grade, "reasoning": "scripted"}))
    if "Break the answer" in text:
        answer = _TAG["answer"].search(text).group(1)
        return Step(text=json.dumps({"claims": [s.strip(" .") for s in answer.split(". ") if s.strip(" .")]}))
    if "For each numbered claim" in text:
        refs = " ".join(_TAG["reference"].findall(text)).lower()
        claims = _TAG["claim"].findall(text)
        return Step(text=json.dumps({"verdicts": [int(c.lower() in refs) for c in claims]}))
    if "RELEVANCE of the answer" in text:
        return Step(text='{"score": 3, "reasoning": "scripted"}')
    return None


def _kw(server, **kw):
    return {"model": "openai/judge-b", "api_base": server.url, "api_key_env": None, "num_retries": 0,
            "backoff_s": 0.01, "timeout": 5.0, **kw}


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "none")


def test_reference_free_scores_hand_worked(llm_server):
    llm_server.rule = scripted
    judge = ReferenceFreeJudge(**_kw(llm_server))
    assert isinstance(judge, PromptedJudge) and isinstance(judge, ExplainingJudge)
    scores, notes = judge.judge_notes(Q, CTX, ANS)
    # grades 2, 0, 1 (tests/unit/judge/test_llm_metrics.py works these out)
    assert scores["judge/rf/context_precision"] == pytest.approx(2 / 3)
    assert scores["judge/rf/context_ap"] == pytest.approx((1 + 2 / 3) / 2)
    assert notes["context_relevance"]["levels"] == [2, 0, 1]
    # claims "Paris is the capital of France" (in passage 1) and "Paris has 9 million people" (nowhere)
    assert scores["judge/rf/faithfulness"] == 0.5
    assert scores["judge/rf/answer_relevance"] == 0.75
    assert scores["judge/rf/judge_failed"] == 0.0 and scores["judge/rf/prompt_tokens"] > 0
    assert llm_server.count == 3 + 2 + 1 == len(judge.prompts(Q, CTX, ANS))


def test_claim_judge_hand_worked(llm_server):
    llm_server.rule = scripted
    judge = ClaimJudge(**_kw(llm_server))
    scores, notes = judge.judge_notes(Q, CTX, ANS)
    assert notes["claims"]["answer_claims"] == ["Paris is the capital of France", "Paris has 9 million people"]
    assert notes["claims"]["gold_claims"] == ["Paris is the capital of France", "It has 2 million people"]
    assert scores["judge/claims/precision"] == 0.5  # claim 1 in the gold answer, claim 2 not
    assert scores["judge/claims/recall"] == 0.5  # gold claim 1 in the answer, gold claim 2 not
    assert scores["judge/claims/f1"] == 0.5
    assert scores["judge/claims/faithfulness"] == 0.5
    assert scores["judge/claims/hallucination"] == 0.5  # "9 million": not in the gold, not in the passages
    assert scores["judge/claims/noise_sensitivity"] == 0.0
    assert scores["judge/claims/self_knowledge"] == 0.0
    assert scores["judge/claims/context_utilisation"] == 1.0  # the one gold claim in the passages is used
    assert scores["judge/claims/judge_failed"] == 0.0
    assert llm_server.count == 6 == len(judge.prompts(Q, CTX, ANS))


def test_malformed_reply_is_asked_again_then_counted_as_a_failure(llm_server):
    llm_server.rule = scripted
    judge = ReferenceFreeJudge(**_kw(llm_server, metrics=["answer_relevance"], parse_retries=1))
    llm_server.script(Step(text="I think it is quite relevant."))
    scores = judge.judge(Q, CTX, ANS)
    assert scores["judge/rf/answer_relevance"] == 0.75 and scores["judge/rf/judge_failed"] == 0.0
    assert llm_server.count == 2
    llm_server.reset()
    llm_server.rule = scripted
    llm_server.script(Step(text="relevant"), Step(text='{"score": 9}'))
    scores = judge.judge(Q, CTX, ANS)
    assert "judge/rf/answer_relevance" not in scores and scores["judge/rf/judge_failed"] == 1.0
    assert llm_server.count == 2

    llm_server.reset()
    llm_server.rule = scripted
    claims = ClaimJudge(**_kw(llm_server, parse_retries=0))
    llm_server.script(Step(text='{"claims": "not a list"}'))  # the answer's claims: malformed, not asked again
    scores = claims.judge(Q, CTX, ANS)
    assert scores["judge/claims/judge_failed"] == 1.0
    assert "judge/claims/precision" not in scores and "judge/claims/faithfulness" not in scores
    assert scores["judge/claims/recall"] == 0.5  # the gold side is judged against the answer's text: still there
