"""Metrics declared beside their code (judge/claims/*, judge/rf/*): compare and the job's aggregation read
the declared direction and kind, not the key's suffix."""

from __future__ import annotations

import numpy as np
import pytest

from ragbench.compare.metrics import metric_spec
from ragbench.compare.runcases import from_rows
from ragbench.judge import claims, reference_free
from ragbench.judge.aggregate import aggregate, is_score, metric_info
from ragbench.judge.metric_info import MetricInfo
from ragbench.stats import verdict
from ragbench.types import CaseResult, Query

LOWER = ("judge/claims/hallucination", "judge/claims/noise_sensitivity", "judge/claims/self_knowledge")


@pytest.mark.parametrize("key", LOWER)
def test_claim_rates_whose_best_is_zero_are_lower_is_better_and_never_zero_filled(key):
    spec = metric_spec(key)
    assert spec.lower_is_better and not spec.zero_when_failed and not is_score(key)
    # a run whose hallucination fell by 0.1 (significantly) is better, not worse
    assert verdict(-0.1, 0.01, lower_is_better=spec.lower_is_better) == "better"


def test_every_declared_key_is_read_from_its_declaration():
    declared = {**claims.METRICS, **reference_free.METRICS}
    assert set(claims.METRICS) == {f"judge/claims/{k}" for k in claims.KEYS}
    for key, info in declared.items():
        assert metric_info(key) is info
        spec = metric_spec(key)
        assert spec.lower_is_better == (not info.higher_is_better)
        assert spec.zero_when_failed == (info.kind == "score")
    assert {k for k, i in declared.items() if not i.higher_is_better} == set(LOWER)
    for key in ("judge/rf/context_ndcg", "judge/rf/faithfulness", "judge/claims/recall", "judge/claims/f1",
                "judge/claims/context_utilisation"):
        assert not metric_spec(key).lower_is_better and metric_spec(key).zero_when_failed
    # a judge's usage and failures are declared costs (ragbench.judge.asking)
    assert metric_spec("judge/claims/judge_failed").lower_is_better
    assert metric_spec("judge/rf/prompt_tokens").lower_is_better and not metric_info("judge/rf/prompt_tokens").higher_is_better


def test_a_lower_is_better_score_cannot_be_declared():
    with pytest.raises(ValueError, match="diagnostic"):
        MetricInfo("rate", "src", higher_is_better=False)
    with pytest.raises(ValueError, match="kind"):
        MetricInfo("rate", "src", kind="cost")


def _case(qid: str, scores: dict[str, float], status: str = "ok") -> CaseResult:
    return CaseResult(query=Query(qid=qid, text="q", answers=("a",), question_type="t"), hits=(), contexts=(), answer=None,
                      scores=scores, status=status)


def test_a_failed_case_does_not_lower_the_hallucination_of_a_job():
    # two judged cases (hallucination 0.5 and 0.25, recall 1 and 0.5) and one that failed before its claims
    cases = [_case("a", {"judge/claims/hallucination": 0.5, "judge/claims/recall": 1.0}),
             _case("b", {"judge/claims/hallucination": 0.25, "judge/claims/recall": 0.5}),
             _case("c", {}, status="failed")]
    m = aggregate(cases)
    assert m["judge/claims/hallucination"] == pytest.approx(0.375)  # (0.5 + 0.25) / 2: the failure is not 0
    assert "judge/claims/hallucination_successful" not in m
    assert m["judge/claims/recall"] == pytest.approx(0.5)  # a score: (1 + 0.5 + 0) / 3
    assert m["judge/claims/recall_successful"] == pytest.approx(0.75)
    # compare reads the cases the same way
    rows = [{"qid": c.query.qid, "question_type": "t", "status": c.status, **c.scores} for c in cases]
    run = from_rows(rows, run_id="r", name="r", dataset="d", topk=None)
    for key in ("judge/claims/hallucination", "judge/claims/recall"):
        assert np.nanmean(run.values(metric_spec(key))) == pytest.approx(m[key])
