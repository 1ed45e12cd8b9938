"""judge=claims's citation support verdict against the loopback server: each cited sentence is checked as one
claim against only the contexts it cites (hand-worked), a malformed verdict leaves that sentence unchecked,
and an answer without cited sentences has no key."""

from __future__ import annotations

import json
import re

import pytest

from ragbench.judge.claims import CITATION_KEY, ClaimJudge
from ragbench.types import Answer, Context, Level, Query
from tests.fixtures.llm_server import Step

pytestmark = pytest.mark.slow
Q = Query(qid="q1", text="Where is Paris and what flows through it?", answers=("Paris is in France.",),
          question_type="fact")
CTX = tuple(Context(chunk_id=f"c{i}", text=t, title=f"doc {i}", level=Level.PARAGRAPH, hit_ids=())
            for i, t in enumerate(["Paris is in France.", "The Seine flows through Paris."]))
# sentence 1 cites ref_1 (holds it), sentence 2 cites ref_1 only (the Seine is in ref_2: unsupported)
ANS = Answer(text="Paris is in France. The Seine flows through Paris.", model="m", citations=(1,),
             cited=(("Paris is in France.", (1,)), ("The Seine flows through Paris.", (1,))))
_TAG = {name: re.compile(rf"<{name}[^>]*>(.*?)</{name}>", re.DOTALL) for name in ("answer", "claim", "reference")}


def scripted(body):
    """Claims = the answer's sentences; a claim is supported when the references contain it."""
    text = body["messages"][-1]["content"]
    if "Break the answer" in text:
        answer = _TAG["answer"].search(text).group(1)
        return Step(text=json.dumps({"claims": [s.strip() for s in re.split(r"(?<=\.) ", answer) if s.strip()]}))
    if "For each numbered claim" in text:
        refs = " ".join(_TAG["reference"].findall(text)).lower()
        return Step(text=json.dumps({"verdicts": [int(c.strip().lower() in refs) for c in _TAG["claim"].findall(text)]}))
    return None


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "none")


def _judge(server):
    return ClaimJudge(model="openai/judge-c", api_base=server.url, api_key_env=None, num_retries=0, backoff_s=0.01,
                      timeout=5.0, parse_retries=0)


def test_each_cited_sentence_is_checked_against_the_contexts_it_cites(llm_server):
    llm_server.rule = scripted
    judge = _judge(llm_server)
    scores, notes = judge.judge_notes(Q, CTX, ANS)
    assert scores[CITATION_KEY] == 0.5
    assert notes["claims"]["cited_supported"] == [1, 0]
    # the Seine sentence's citation check shows the judge ref_1 (doc 0) alone, not ref_2 (doc 1) that holds it
    checks = [_TAG["reference"].findall(r["messages"][-1]["content"]) for r in llm_server.requests
              if [c.strip() for c in _TAG["claim"].findall(r["messages"][-1]["content"])]
              == ["The Seine flows through Paris."]]
    assert ["Paris is in France."] in [[x.strip() for x in refs] for refs in checks]
    # prompts (ragbench.plan) list the two citation checks beside the claim requests
    assert len(judge.prompts(Q, CTX, ANS)) == len(judge.prompts(Q, CTX, Answer(text=ANS.text, model="m"))) + 2
    assert CITATION_KEY not in judge.judge(Q, CTX, Answer(text=ANS.text, model="m"))


def test_a_malformed_citation_verdict_is_a_judge_failure(llm_server):
    def rule(body):
        text = body["messages"][-1]["content"]
        if "For each numbered claim" in text and "<claim" in text and "Seine" in _TAG["claim"].findall(text)[0] \
                and len(_TAG["reference"].findall(text)) == 1 and "Seine" not in _TAG["reference"].findall(text)[0]:
            return Step(text="not json")
        return scripted(body)

    llm_server.rule = rule
    scores, notes = _judge(llm_server).judge_notes(Q, CTX, ANS)
    assert notes["claims"]["cited_supported"] == [1, None]
    assert scores[CITATION_KEY] == 1.0 and scores["judge/claims/judge_failed"] == 1.0
