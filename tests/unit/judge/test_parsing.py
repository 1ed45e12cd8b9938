"""Tolerant judge-reply parsing (ragbench.judge.parsing) on replies as small real models write them: JSON
first (fenced, in prose, Python-quoted), then labelled fallbacks, then a lone value; never a guess."""

from __future__ import annotations

import json

import pytest

from ragbench.judge.parsing import (
    claims_schema,
    json_values,
    parse_claims,
    parse_score,
    parse_verdicts,
    score_schema,
    verdicts_schema,
)
from ragbench.judge.rubrics import load_rubrics, parse_verdict

GRADED = (0, 1, 2, 3, 4)
BINARY = (0, 4)

# (reply, scale, score, how): replies written the way SmolLM2-135M and other small models answer a rubric
REPLIES = [
    # JSON, as asked, and JSON wrapped the ways models wrap it
    ('{"score": 4, "reasoning": "matches the gold answer"}', GRADED, 4, "json"),
    ('```json\n{"score": 3, "reasoning": "mostly right"}\n```', GRADED, 3, "json"),
    ('```\n{"score": 1}\n```\nI hope this helps!', GRADED, 1, "json"),
    ('Here is my evaluation:\n{"score": 2, "reasoning": "half of it"}\nLet me know.', GRADED, 2, "json"),
    ("{'score': 4, 'reasoning': 'same date'}", GRADED, 4, "json"),  # Python quotes
    ('{"score": 3, "reasoning": "ok",}', GRADED, 3, "json"),  # trailing comma
    ('{"Score": "4", "Reasoning": "same"}', GRADED, 4, "json"),
    ('{"score": "4/4"}', GRADED, 4, "json"),
    ('{"score": 4, "reasoning": "The answer says Paris, which', GRADED, 4, "labelled"),  # cut at max_tokens
    ('{"score": 7, "reasoning": "excellent"}', GRADED, None, "failed"),  # off the scale: no fallback
    ('{"score": 3}', BINARY, None, "failed"),  # a middle score on a 0-or-4 rubric
    ('{"score": 4} ... on reflection {"score": 1}', GRADED, None, "failed"),  # two verdicts: ambiguous
    ('{"score": true}', GRADED, None, "failed"),
    # labelled
    ("Score: 4", GRADED, 4, "labelled"),
    ("**Score:** 3/4\nThe answer omits the year.", GRADED, 3, "labelled"),
    ("The answer is correct. Score = 4", GRADED, 4, "labelled"),
    ("I would give this a rating of 2 out of 4.", GRADED, 2, "labelled"),
    ("Score: 4/5", GRADED, None, "failed"),  # another scale: which 0-4 grade is 4/5? not guessed
    ("Score: 2.5", GRADED, None, "failed"),
    ("Score: 4. Actually, score: 2.", GRADED, None, "failed"),  # two labelled scores
    ("Verdict: CORRECT", BINARY, 4, "labelled"),
    ("Verdict: no, the date differs", BINARY, 0, "labelled"),
    ("Verdict: correct", GRADED, None, "failed"),  # yes/no means nothing on a 0-4 scale
    ("Using a score of 0-4, I give it Score: 3", GRADED, 3, "labelled"),  # the scale restated is no score
    ("The CORRECTNESS of the generated answer is 4.", GRADED, 4, "labelled"),  # SmolLM2-135M, verbatim
    ("Faithfulness: 3\nEvery claim is in ref_1.", GRADED, 3, "labelled"),
    ("The model reaches an accuracy of 85% on SST-2.", GRADED, None, "failed"),  # a restated answer
    ("The answer is 4.", GRADED, None, "failed"),  # SmolLM2-135M, verbatim: a numeric answer or a grade?
    ("The gold answer is 4.\n\nThe answer is 4.", GRADED, None, "failed"),  # SmolLM2-135M, verbatim
    # a lone value
    ("4", GRADED, 4, "bare"),
    ("3.\nThe answer names the right person but the wrong year.", GRADED, 3, "bare"),
    ("**2**", GRADED, 2, "bare"),
    ("Yes", BINARY, 4, "bare"),
    # restated answers and prose: no score
    ("The capital of France is Paris.", GRADED, None, "failed"),
    ("The answer names 2 dates and 1 place.", GRADED, None, "failed"),
    ("Melanie painted a sunset in 2022 [ref_1].", GRADED, None, "failed"),
    ("Answer: No, the paper does not say.", BINARY, None, "failed"),  # a restated answer is no verdict
    ("", GRADED, None, "failed"),
]


@pytest.mark.parametrize(("reply", "scale", "score", "how"), REPLIES)
def test_score_replies_of_real_models(reply, scale, score, how):
    parsed = parse_score(reply, scale)
    assert (parsed.value, parsed.how) == (score, how)
    verdict = parse_verdict(reply, scale)  # the rubric judge reads them the same way, as floats
    assert (verdict.score, verdict.how) == (None if score is None else float(score), how)


def test_reasoning_comes_from_the_json_object():
    assert parse_verdict('Sure: {"score": 4, "reasoning": "same date"}', GRADED).reasoning == "same date"


@pytest.mark.parametrize(("reply", "claims"), [
    ('{"claims": ["Paris is in France.", " ", "It has 2M people."]}', ["Paris is in France.", "It has 2M people."]),
    ('```json\n{"claims": []}\n```', []),
    ('["A is B.", "C is D."]', ["A is B.", "C is D."]),
    ('{"claims": [{"claim": "A is B."}, {"statement": "C is D."}]}', ["A is B.", "C is D."]),
    ("Here are the claims:\n- A is B.\n- C is D.", ["A is B.", "C is D."]),
    ("1. A is B.\n2) C is D.", ["A is B.", "C is D."]),
    ('{"claims": ["A is B.", "C is', None),  # truncated: a claim would be lost silently
    ('{"claims": "A is B."}', None),
    ("The capital of France is Paris.", None),  # the answer restated, not a list
])
def test_claim_lists(reply, claims):
    assert parse_claims(reply).value == claims


@pytest.mark.parametrize(("reply", "n", "verdicts"), [
    ('{"verdicts": [1, 0], "reasoning": "r"}', 2, [1, 0]),
    ('{"verdicts": [true, "no", "yes"]}', 3, [1, 0, 1]),
    ('{"verdicts": [{"claim": "a", "verdict": "supported"}, {"claim": "b", "verdict": 0}]}', 2, [1, 0]),
    ("[1, 1]", 2, [1, 1]),
    ("1. yes\n2. not supported", 2, [1, 0]),
    ("Claim 1: supported\nClaim 2: unsupported\nClaim 3: 1", 3, [1, 0, 1]),
    ("Verdict: yes", 1, [1]),
    ("No.", 1, [0]),
    ('{"verdicts": [1, 0]}', 3, None),  # one verdict per claim, or none counts
    ("1. yes\n2. no", 3, None),  # claim 3 not judged
    ("1. yes\n1. no", 1, None),  # claim 1 judged twice
    ("1. supported, not supported", 1, None),  # both on one line
    ("The claims are about Paris.", 2, None),
])
def test_claim_verdicts(reply, n, verdicts):
    assert parse_verdicts(reply, n).value == verdicts


def test_json_values_finds_objects_in_prose_and_fences():
    text = 'a {"x": 1} b ```json\n{"y": [1, {"z": 2}]}\n``` c'
    assert list(json_values(text)) == [{"y": [1, {"z": 2}]}, {"x": 1}]


def _accepts(schema: dict, value: dict) -> bool:
    """A small check of the schemas' shape (a JSON-schema validator is not a dependency)."""
    props = schema["properties"]
    if set(value) != set(schema["required"]) or set(value) - set(props):
        return False
    for key, spec in props.items():
        v = value[key]
        if spec["type"] == "integer" and (not isinstance(v, int) or v not in spec["enum"]):
            return False
        if spec["type"] == "array" and not (spec.get("minItems", 0) <= len(v) <= spec.get("maxItems", len(v))):
            return False
    return True


def test_schemas_describe_what_the_readers_accept():
    rubrics = load_rubrics("default")
    locomo = rubrics.accuracy_for("locomo")
    schema = locomo.schema
    assert schema == score_schema((0, 4)) and schema["properties"]["score"]["enum"] == [0, 4]
    assert list(schema["properties"]) == ["score", "reasoning"]  # the score first: a cut reply still holds it
    good = {"score": 4, "reasoning": "same day"}
    assert _accepts(schema, good) and parse_verdict(json.dumps(good), locomo.scores).score == 4.0
    assert not _accepts(schema, {"score": 3, "reasoning": "x"})
    v = verdicts_schema(2)
    assert _accepts(v, {"verdicts": [1, 0], "reasoning": "r"}) and not _accepts(v, {"verdicts": [1], "reasoning": "r"})
    assert parse_verdicts(json.dumps({"verdicts": [1, 0], "reasoning": "r"}), 2).value == [1, 0]
    assert parse_claims(json.dumps({"claims": ["a"]})).value == ["a"]
    assert claims_schema()["properties"]["claims"]["items"] == {"type": "string"}
    json.dumps([schema, v, claims_schema()])  # plain data, sendable as response_format
