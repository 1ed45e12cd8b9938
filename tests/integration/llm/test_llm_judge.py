"""LLMJudge against the loopback server: rubric routing, normalisation, failures, repeats, same-model rule."""

from __future__ import annotations

import pytest

from ragbench.errors import ConfigError
from ragbench.judge.llm import LLMJudge
from ragbench.llm.errors import LLMServerError
from ragbench.protocols import Judge
from ragbench.types import Answer, Context, Level, Query
from tests.fixtures.llm_server import Step

Q = Query(
    qid="q1", text="Where is the Louvre?", answers=("Paris", "in Paris, France"), question_type="single_hop"
)
CTX = (
    Context(
        chunk_id="c1", text="The Louvre is in Paris.", title="Art", level=Level.PARAGRAPH, hit_ids=("c1",)
    ),
)
ANS = Answer(text="Paris", model="openai/gen")


def _judge(server, cache_dir, **kw):
    defaults = {
        "model": "openai/judge",
        "api_base": server.url,
        "api_key_env": None,
        "num_retries": 1,
        "backoff_s": 0.01,
        "timeout": 5.0,
        "dataset": "qasper",
        "generator_model": "openai/gen",
    }
    return LLMJudge(**{**defaults, **kw})


def _by_rubric(scores):
    """A responder giving each rubric its own score, recognised by the rubric's wording."""

    def reply(body):
        user = body["messages"][-1]["content"]
        for marker, value in scores.items():
            if marker in user:
                return value
        return '{"score": 0, "reasoning": "unrecognised rubric"}'

    return reply


@pytest.fixture(autouse=True)
def _dummy_key(monkeypatch):
    monkeypatch.setenv(
        "OPENAI_API_KEY", "sk-dummy-for-litellm"
    )  # api_key_env=None: litellm's default variable


def test_scores_are_normalised_per_rubric(llm_server, cache_dir):
    llm_server.responder = _by_rubric(
        {
            "CORRECTNESS": '{"score": 3, "reasoning": "minor omission"}',
            "FAITHFULNESS": '{"score": 4, "reasoning": "supported"}',
            "RELEVANCE": "Score: 2",
            "Several acceptable gold answers": '{"score": 1, "reasoning": "poor"}',
        }
    )
    judge = _judge(llm_server, cache_dir)
    assert isinstance(judge, Judge)
    out = judge.judge(Q, CTX, ANS)
    assert out["judge/score"] == 1.0 and out["judge/accuracy"] == 0.25
    assert (
        out["judge/correctness"] == 0.75
        and out["judge/faithfulness"] == 1.0
        and out["judge/relevance"] == 0.5
    )
    assert out["judge/judge_failed"] == 0.0 and out["judge/heuristic_refusal"] == 0.0
    assert llm_server.count == 4 and "judge/cache_hits" not in out  # its client caches nothing to count
    assert out["judge/prompt_tokens"] > 0 and out["judge/completion_tokens"] > 0
    assert "spread" not in " ".join(out)  # repeats=1
    # the gold answers reach the judge joined by " | "
    assert any(
        "<gold>Paris | in Paris, France</gold>" in r["messages"][-1]["content"] for r in llm_server.requests
    )
    # the judge's client keeps no replies: the verdict is cached once, as the case runner's stage record
    assert judge.judge(Q, CTX, ANS) == out
    assert llm_server.count == 8


def test_locomo_uses_the_binary_rubric(llm_server, cache_dir):
    llm_server.responder = lambda body: '{"score": 4, "reasoning": "same day"}'
    out = _judge(llm_server, cache_dir, dataset="locomo", metrics=["accuracy"]).judge(Q, CTX, ANS)
    assert out == {**out, "judge/score": 4.0, "judge/accuracy": 1.0}
    assert "lenient" in llm_server.requests[0]["messages"][-1]["content"]
    assert llm_server.count == 1
    llm_server.responder = lambda body: '{"score": 3}'  # not on the 0/4 scale -> failed judgment
    failed = _judge(llm_server, cache_dir, dataset="locomo", metrics=["accuracy"]).judge(
        Q, CTX, ANS
    )
    assert (
        failed["judge/judge_failed"] == 1.0 and "judge/score" not in failed and "judge/accuracy" not in failed
    )


def test_garbled_reply_is_a_failed_judgment_without_a_score(llm_server, cache_dir):
    llm_server.responder = _by_rubric({"RELEVANCE": "I refuse to grade.", "CORRECTNESS": '{"score": 4}'})
    out = _judge(llm_server, cache_dir, metrics=["correctness", "relevance"]).judge(Q, CTX, ANS)
    assert out["judge/judge_failed"] == 1.0
    assert "judge/relevance" not in out and out["judge/correctness"] == 1.0


def test_repeats_give_spread_and_flip(llm_server, cache_dir):
    llm_server.script(Step(text='{"score": 4}'), Step(text='{"score": 2}'), Step(text='{"score": 3}'))
    out = _judge(llm_server, cache_dir, metrics=["accuracy"], repeats=3, pass_threshold=3).judge(Q, CTX, ANS)
    assert out["judge/score"] == 3.0 and out["judge/spread"] == 2.0 and out["judge/flip"] == 1.0
    assert llm_server.count == 3  # each repeat is its own call (the repeat index is in the cache key)
    llm_server.reset()
    llm_server.script(Step(text='{"score": 4}'), Step(text='{"score": 3}'))
    q2 = Query(qid="q2", text="Other?", answers=("x",), question_type="t")
    steady = _judge(llm_server, cache_dir, metrics=["accuracy"], repeats=2).judge(q2, CTX, ANS)
    assert steady["judge/spread"] == 1.0 and steady["judge/flip"] == 0.0


def test_refusal_to_an_unanswerable_question_needs_no_call(llm_server, cache_dir):
    unanswerable = Query(
        qid="u", text="What is Mel's blood type?", answers=(), question_type="adversarial", answerable=False
    )
    out = _judge(llm_server, cache_dir).judge(unanswerable, CTX, Answer(text="Not mentioned", model="m"))
    assert out["judge/score"] == 4.0 and out["judge/accuracy"] == 1.0 and out["judge/faithfulness"] == 1.0
    assert out["judge/heuristic_refusal"] == 1.0 and llm_server.count == 0


def test_a_wrong_answer_to_an_unanswerable_question_is_judged(llm_server, cache_dir):
    llm_server.responder = lambda body: '{"score": 0}'
    unanswerable = Query(
        qid="u2", text="Blood type?", answers=(), question_type="adversarial", answerable=False
    )
    out = _judge(llm_server, cache_dir, metrics=["accuracy"]).judge(
        unanswerable, CTX, Answer(text="Type O", model="m")
    )
    assert out["judge/score"] == 0.0
    assert "Not mentioned" in llm_server.requests[0]["messages"][-1]["content"]  # the gold says: refuse


def test_failed_call_raises_so_the_case_fails(llm_server, cache_dir):
    llm_server.script(Step(status=500), Step(status=500))
    with pytest.raises(LLMServerError, match="judge model 'openai/judge'"):
        _judge(llm_server, cache_dir, metrics=["accuracy"]).judge(Q, CTX, ANS)
    assert llm_server.count == 2  # num_retries=1


def test_same_model_is_refused_unless_allowed(llm_server, cache_dir):
    with pytest.raises(ConfigError, match="allow_same_model"):
        _judge(llm_server, cache_dir, generator_model="openai/judge")
    judge = _judge(llm_server, cache_dir, generator_model="openai/judge", allow_same_model=True)
    assert judge.log_tags()["judge.same_model"] == "true"
    assert _judge(llm_server, cache_dir).log_tags()["judge.same_model"] == "false"
    assert len(judge.log_params()["judge/rubrics_hash"]) == 16


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"metrics": ["accuracy", "vibes"]}, "judge.metrics"),
        ({"metrics": []}, "judge.metrics"),
        ({"repeats": 0}, "judge.repeats"),
        ({"rubrics": "nope"}, "no judge prompt named 'nope'"),
    ],
)
def test_bad_judge_settings(llm_server, cache_dir, kw, match):
    with pytest.raises(ConfigError, match=match):
        _judge(llm_server, cache_dir, **kw)


def test_identity_names_everything_that_shapes_a_verdict(llm_server, cache_dir):
    base = _judge(llm_server, cache_dir)
    assert base.identity.startswith("llm-judge:openai/judge(rubrics=" + base.rubrics.hash)
    others = {
        _judge(llm_server, cache_dir, **kw).identity
        for kw in (
            {"repeats": 2},
            {"metrics": ["accuracy"]},
            {"dataset": "locomo"},
            {"temperature": 0.3},
            {"pass_threshold": 2},
            {"model": "openai/judge2"},
        )
    }
    assert base.identity not in others and len(others) == 6


def test_a_garbled_reply_is_asked_again(llm_server, cache_dir):
    llm_server.script(Step(text="no idea"))
    judge = _judge(llm_server, cache_dir, metrics=["accuracy"])
    assert judge.judge(Q, CTX, ANS)["judge/judge_failed"] == 1.0
    llm_server.responder = lambda body: '{"score": 4}'
    assert judge.judge(Q, CTX, ANS)["judge/score"] == 4.0  # asked again, not replayed
    assert llm_server.count == 2 and not cache_dir.exists()  # verdicts are stage records (ragbench.cases)
