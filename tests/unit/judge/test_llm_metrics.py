"""The pure parts of the reference-free and claim judges: hand-worked ratios, reply parsers, prompt files."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragbench.errors import ConfigError
from ragbench.judge.asking import int_in, json_field, load_prompts, str_list, verdict_list
from ragbench.judge.claims import claim_metrics
from ragbench.judge.reference_free import METRICS, PROMPT_KIND, VARIABLES, relevance_scores


def test_relevance_scores_hand_worked():
    # judged grades in rank order 2, 0, 1: relevant (grade >= 1) at ranks 1 and 3
    s = relevance_scores([2, 0, 1])
    assert s["judge/rf/context_precision"] == pytest.approx(2 / 3)
    assert s["judge/rf/context_relevance"] == pytest.approx(3 / 6)
    # AP = (P@1 * 1 + P@3 * 1) / 2 = (1 + 2/3) / 2
    assert s["judge/rf/context_ap"] == pytest.approx((1 + 2 / 3) / 2)
    # DCG = 2/log2(2) + 0 + 1/log2(4) = 2.5; ideal 2, 1, 0: 2 + 1/log2(3)
    assert s["judge/rf/context_ndcg"] == pytest.approx(2.5 / (2 + 1 / math.log2(3)))


def test_ndcg_equals_scikit_learn():
    from sklearn.metrics import ndcg_score

    for levels in ([2, 0, 1], [0, 1, 2, 2, 0], [1, 1, 0, 2]):
        ranks = np.arange(len(levels), 0, -1)[None, :]  # the retrieved order: first ranked highest
        assert relevance_scores(levels)["judge/rf/context_ndcg"] == pytest.approx(
            ndcg_score(np.array([levels]), ranks))


def test_nothing_relevant_and_nothing_retrieved():
    s = relevance_scores([0, 0])
    assert s["judge/rf/context_precision"] == s["judge/rf/context_ap"] == s["judge/rf/context_ndcg"] == 0.0
    assert relevance_scores([]) == {}
    assert set(relevance_scores([1])) <= set(METRICS)


def test_claim_metrics_hand_worked():
    # 4 answer claims: in gold [1, 1, 0, 0], in passages [1, 0, 1, 0]
    # 3 gold claims: in answer [1, 0, 1], in passages [1, 1, 0]
    m = claim_metrics([1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1], [1, 1, 0])
    assert m["judge/claims/precision"] == 0.5
    assert m["judge/claims/recall"] == pytest.approx(2 / 3)
    assert m["judge/claims/f1"] == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert m["judge/claims/faithfulness"] == 0.5
    assert m["judge/claims/hallucination"] == 0.25  # claim 4: not in gold, not in passages
    assert m["judge/claims/noise_sensitivity"] == 0.25  # claim 3: not in gold, in passages
    assert m["judge/claims/self_knowledge"] == 0.25  # claim 2: in gold, not in passages
    assert m["judge/claims/context_utilisation"] == 0.5  # of gold claims 1, 2 in passages, 1 in the answer


def test_claim_metrics_leave_out_what_has_no_denominator():
    assert claim_metrics(None, None, [0, 0], [0, 0]) == {"judge/claims/recall": 0.0}
    m = claim_metrics([1], None, None, None)
    assert m == {"judge/claims/precision": 1.0}


@pytest.mark.parametrize(("text", "value"), [
    ('{"score": 2, "reasoning": "x"}', 2),
    ('Sure.\n```json\n{"score": 1}\n```', 1),
    ('The verdict: {"score": 0} as asked', 0),
    ('{"score": 3}', None),  # outside 0-2
    ('{"score": 1.5}', None),
    ('{"score": true}', None),
    ("score: 2", None),  # these prompts ask for JSON only
    ("", None),
])
def test_int_parser(text, value):
    assert int_in((0, 1, 2))(text) == value


def test_list_parsers():
    assert str_list("claims")('{"claims": ["a", " ", "b "]}') == ["a", "b"]
    assert str_list("claims")('{"claims": []}') == []
    assert str_list("claims")('{"claims": "a"}') is None
    assert verdict_list(2)('{"verdicts": [1, 0], "reasoning": "r"}') == [1, 0]
    assert verdict_list(2)('{"verdicts": [true, false]}') == [1, 0]
    assert verdict_list(3)('{"verdicts": [1, 0]}') is None  # one verdict per claim, or none counts
    assert verdict_list(1)('{"verdicts": [2]}') is None
    assert json_field('{"a": {"b": 1}, "c": [1]}', "c") == [1]


def test_shipped_prompt_file_and_a_bad_one(tmp_path):
    prompts = load_prompts("default", kind=PROMPT_KIND, variables=VARIABLES)
    msgs = prompts.messages("context_relevance", question="Q", passage="P")
    assert msgs[0]["role"] == "system" and "<passage>P</passage>" in msgs[1]["content"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nsystem: s\nprompts:\n  context_relevance: '$question $nope'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="no prompt 'answer_relevance'"):
        load_prompts(str(bad), kind=PROMPT_KIND, variables=VARIABLES)
    bad.write_text("version: 1\nsystem: s\nprompts:\n" + "".join(
        f"  {n}: '$question'\n" for n in VARIABLES if n != "claim_check") + "  claim_check: '$nope'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown variable \\$nope"):
        load_prompts(str(bad), kind=PROMPT_KIND, variables=VARIABLES)
