"""Issue 47.5: a local model's graded verdict by constrained decoding, without torch. The schema recognised
(the judge's own ``response_format`` after the request's key round trip, ``score_schema``; never a claim
list or per-claim verdicts), the forced prefix and each digit's token under small stand-in tokenizers, the
greedy pick, a round answering verdicts with ``{"score": N}`` (one scoring pass, other schemas generated
freely, ``response_format`` in the reply-cache key), and the judge's ``grammar`` default for a local model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from ragbench.budget import Budget
from ragbench.cache.keys import reply_key
from ragbench.cache.store import StageCache
from ragbench.judge.llm import LLMJudge
from ragbench.judge.parsing import claims_schema, score_schema, verdicts_schema
from ragbench.judge.rubrics import parse_verdict
from ragbench.llm.local import grammar
from ragbench.llm.local.client import LocalClient
from ragbench.llm.local.engine import Generated
from ragbench.llm.local.grammar import Graded, graded_field, pick, plan
from ragbench.llm.wave import Wave
from ragbench.session import LEDGER


def chars(text: str) -> list[int]:
    """A tokenizer spelling every character as its own token."""
    return [ord(c) for c in text]


def merged_space(text: str) -> list[int]:
    """A tokenizer that spells " <digit>" as one token (id 1000 + digit), everything else per character."""
    out: list[int] = []
    i = 0
    while i < len(text):
        if text[i] == " " and i + 1 < len(text) and text[i + 1].isdigit():
            out.append(1000 + int(text[i + 1]))
            i += 2
        else:
            out.append(ord(text[i]))
            i += 1
    return out


def wide_seven(text: str) -> list[int]:
    """A tokenizer that spells "7" in two tokens: no single-token choice for it."""
    return [t for c in text for t in ((55, 55) if c == "7" else (ord(c),))]


def test_the_judges_verdict_schema_is_recognised_after_the_request_key_round_trip():
    judge = LLMJudge(model="local", metrics=["accuracy", "faithfulness"])
    for metric in ("accuracy", "faithfulness"):
        asked = judge.response_format(metric)
        keyed = json.loads(json.dumps(asked, sort_keys=True))  # LLMClient._request sorts the keys
        found = graded_field(keyed)
        assert found is not None and found.field == "score"
        assert set(found.allowed) == set(judge._rubric(metric).scores)
    assert graded_field(score_schema([4, 0, 2], name="grade")) == Graded("grade", (0, 2, 4))


@pytest.mark.parametrize(
    "schema",
    [
        claims_schema(),
        verdicts_schema(3),
        score_schema(range(11)),  # 10 is two digits
        {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]},  # no enum
        {"type": "object", "properties": {"score": {"type": "integer", "enum": [True, False]}}},
        {"type": "object", "properties": {"score": {"type": "integer", "enum": [1, 2]},
                                          "claims": {"type": "array"}}, "required": ["score"]},
        {"type": "array", "items": {"type": "integer"}},
    ],
)
def test_a_schema_the_grammar_cannot_constrain_is_left_to_free_generation(schema):
    assert graded_field({"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}) is None
    assert graded_field(None) is None


def test_the_forced_prefix_and_one_token_per_digit_under_each_tokenizer():
    graded = Graded("score", (0, 1, 2, 3, 4))
    plain = plan(graded, chars)
    assert plain is not None and plain.prefix == tuple(chars('{"score": '))
    assert plain.tokens == tuple(chars("01234"))
    merged = plan(graded, merged_space)  # the space belongs to the digit: the prefix stops before it
    assert merged is not None and merged.prefix == tuple(chars('{"score":'))
    assert merged.tokens == (1000, 1001, 1002, 1003, 1004)
    assert plan(Graded("score", (1, 7)), wide_seven) is None  # "7" is two tokens: generated freely
    assert plain.reply(3) == '{"score": 3}' and parse_verdict(plain.reply(3), graded.allowed).score == 3


def test_the_pick_is_the_highest_score_and_the_first_of_equal_ones():
    assert pick([0.1, 2.5, -1.0]) == 1
    assert pick([1.0, 3.0, 3.0]) == 1
    with pytest.raises(ValueError):
        pick([])


class GradingModel:
    """A stand-in model spelling characters as tokens; it chooses the allowed value at index (prompt length
    mod the choices) and records its scoring passes and free generations."""

    context_window = 256

    def __init__(self) -> None:
        self.passes: list[list[list[int]]] = []
        self.generated: list[int] = []

    def prompt_ids(self, messages: Any) -> list[int]:
        return chars(messages[-1]["content"])

    def count(self, messages: Any) -> int:
        return len(self.prompt_ids(messages))

    def plan(self, graded: Graded) -> grammar.Plan | None:
        return plan(graded, chars)

    def choose(self, prompts: Sequence[Sequence[int]], tokens: Sequence[int], **kw: Any) -> list[int]:
        self.passes.append([list(p) for p in prompts])
        return [len(p) % len(tokens) for p in prompts]

    def generate(self, prompts: Any, **kw: Any) -> list[Generated]:
        self.generated.extend(len(p) for p in prompts)
        return [Generated("free", len(p), 5) for p in prompts]


@pytest.fixture
def graded_client(tmp_path, monkeypatch):
    client = LocalClient(model="local", cache=StageCache(dir=str(tmp_path / "c")), batch_size=8,
                         max_tokens=16, role="judge")
    model = GradingModel()
    monkeypatch.setattr(client, "local_model", lambda: model)
    LEDGER.start_job(Budget(scope="job"))
    return client, model


def _wave(client: Any, case: Any, n: int) -> list[Any]:
    wave = Wave(default=False)
    with wave.serving([client]):
        return wave.run([lambda i=i: case(i) for i in range(n)])


def test_a_round_answers_graded_verdicts_by_one_scoring_pass_and_other_schemas_freely(graded_client):
    client, model = graded_client
    judge = LLMJudge(model="local", metrics=["accuracy"])
    verdict = judge.response_format("accuracy")
    claims = {"type": "json_schema", "json_schema": {"name": "claims", "schema": claims_schema()}}
    asks = [("q1", verdict), ("question2", verdict), ("q3", claims), ("q4", None)]

    def case(i: int) -> str:
        text, fmt = asks[i]
        return client.complete([{"role": "user", "content": text}], response_format=fmt).text

    replies = _wave(client, case, len(asks))
    allowed = (0, 1, 2, 3, 4)
    prefix = chars('{"score": ')
    assert model.passes == [[chars("q1") + prefix, chars("question2") + prefix]]  # one pass, both verdicts
    assert replies[:2] == [json.dumps({"score": allowed[(2 + len(prefix)) % 5]}),
                           json.dumps({"score": allowed[(9 + len(prefix)) % 5]})]
    assert all(parse_verdict(r, allowed).score is not None for r in replies[:2])
    assert replies[2:] == ["free", "free"] and model.generated == [2, 2]  # claims and plain: free text
    plain = client._request([{"role": "user", "content": "q1"}], None)
    asked = client._request([{"role": "user", "content": "q1"}], None, verdict)
    assert reply_key("chat", plain) != reply_key("chat", asked)  # response_format enters the key
    model.passes.clear()
    assert _wave(client, case, len(asks)) == replies
    assert model.passes == []  # the rerun: every verdict from the reply cache


def test_a_local_judge_constrains_by_default_and_the_run_records_it():
    on = LLMJudge(model="local", metrics=["accuracy"])
    off = LLMJudge(model="local", metrics=["accuracy"], structured_output=False)
    remote = LLMJudge(model="openai/judge", api_base="http://127.0.0.1:9/v1", metrics=["accuracy"])
    assert on.log_params()["judge/structured_output"] == "grammar" and on.response_format("accuracy")
    assert "structured_output=grammar" in on.identity
    assert off.log_params()["judge/structured_output"] == "off" and off.response_format("accuracy") is None
    assert remote.log_params()["judge/structured_output"] == "json_schema"
    assert on.client.supports_response_format()
