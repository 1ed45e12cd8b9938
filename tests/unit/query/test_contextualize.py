"""query=contextualize (ragbench.query.contextualize): the rules baseline, the data's rewrite, the LLM
rewrite with its history, and the config that builds no LLM endpoint for the rules."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ragbench.errors import BudgetExhaustedError, ConfigError, JobStopped
from ragbench.query.contextualize import ContextualizeLLM, ContextualizeRules, DatasetRewrite, contextualizer
from ragbench.types import Query, Turn

HISTORY = (Turn("Who founded Acme?", "Jane Doe", "c#1"), Turn("When?", "In 1990", "c#2"))
TURN = Query(qid="c#3", text="Where was she born?", answers=(), question_type="t", conversation="c", turn=3,
             history=HISTORY, meta={"rewrite": "Where was Jane Doe born?"})
FIRST = Query(qid="c#1", text="Who founded Acme?", answers=(), question_type="t", conversation="c", turn=1)


def test_rules_concatenate_the_last_k_user_messages():
    assert ContextualizeRules(history_turns=1).variants(TURN) == ("When? Where was she born?",)
    assert ContextualizeRules(history_turns=5).variants(TURN) == ("Who founded Acme? When? Where was she born?",)
    assert ContextualizeRules(history_turns=0).variants(TURN) == ("Where was she born?",)
    assert ContextualizeRules().variants(FIRST) == ("Who founded Acme?",)
    with pytest.raises(ConfigError, match="query.history_turns"):
        ContextualizeRules(history_turns=-1)


def test_dataset_rewrite():
    assert DatasetRewrite().variants(TURN) == ("Where was Jane Doe born?",)
    assert DatasetRewrite().variants(FIRST) == (FIRST.text,)


@dataclass
class Reply:
    text: str


class FakeClient:
    max_concurrency = 2
    model = "fake"

    def __init__(self, reply: str = " Where was  Jane Doe born? ", fail: Exception | None = None) -> None:
        self.reply, self.fail, self.sent = reply, fail, []

    def complete(self, messages):
        self.sent.append(messages)
        if self.fail:
            raise self.fail
        return Reply(self.reply)


def test_llm_rewrites_from_the_last_turns_with_their_answers():
    client = FakeClient()
    t = ContextualizeLLM(client=client, history_turns=1)
    assert t.variants(TURN) == ("Where was Jane Doe born?",)
    prompt = client.sent[0][0]["content"]
    assert "User: When?\nAssistant: In 1990" in prompt and "Who founded" not in prompt
    assert "Last message: Where was she born?" in prompt
    assert t.variants(FIRST) == (FIRST.text,) and len(client.sent) == 1  # no history: not asked
    assert t.params()["query/method"] == "llm"


def test_llm_failure_searches_the_turn_and_a_budget_stop_stops_the_job():
    t = ContextualizeLLM(client=FakeClient(fail=RuntimeError("down")))
    assert t.variants(TURN) == (TURN.text,) and t.failures == 1
    with pytest.raises(JobStopped, match="raise the budget"):
        ContextualizeLLM(client=FakeClient(fail=BudgetExhaustedError("max_calls"))).variants(TURN)


def test_the_config_builds_the_rules_without_an_endpoint(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # an LLM endpoint would refuse to build without it
    node = OmegaConf.load(Path(__file__).resolve().parents[3] / "ragbench" / "conf" / "query" / "contextualize.yaml")
    client = node.transform.client
    client.api_key_env = "OPENAI_API_KEY"
    built = contextualizer(method="rules", history_turns=2, client=client)
    assert isinstance(built, ContextualizeRules) and built.history_turns == 2
    assert isinstance(contextualizer(method="dataset"), DatasetRewrite)
    with pytest.raises(ConfigError, match="query.transform.method='x'"):
        contextualizer(method="x")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        contextualizer(method="llm", client=client)
