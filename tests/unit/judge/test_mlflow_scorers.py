"""judge=mlflow's reading of MLflow scorer results and of a case's expectations, without MLflow: what number a
verdict becomes (yes 1, no 0, a bool, a number, a list's mean), a failed judgment, and the expectations given."""

from __future__ import annotations

import json
from types import SimpleNamespace

from ragbench.judge.mlflow_scorers import EXPECTATIONS_META, expectations, verdicts
from ragbench.types import Evidence, Query


def fb(value, rationale=None, error=None):
    return SimpleNamespace(value=value, rationale=rationale, error=error)


def test_verdicts_read_as_mlflow_evaluate_aggregates_them():
    assert verdicts(fb("yes", "grounded")) == (1.0, ["grounded"])
    assert verdicts(fb(SimpleNamespace(value="no"))) == (0.0, [])  # CategoricalRating.NO
    assert verdicts(True) == (1.0, []) and verdicts(3) == (3.0, []) and verdicts(0.25) == (0.25, [])
    assert verdicts([fb(0.5), fb("yes"), fb("no")]) == (0.5, [])  # per passage: their mean


def test_an_error_or_a_value_that_is_no_verdict_is_a_failed_judgment():
    assert verdicts(fb(None, error=SimpleNamespace(error_message="timeout"))) == (None, ["error: timeout"])
    value, notes = verdicts(fb("maybe"))
    assert value is None and notes == ["not a verdict: 'maybe'"]
    assert verdicts([fb("yes"), fb("unclear")])[0] is None


def test_expectations_are_the_gold_or_a_dataset_s_own():
    q = Query(qid="q", text="?", answers=("4.20 euros",), question_type="t",
              evidence=(Evidence(text="costs 4.20", doc_id="ferry.md"), Evidence(ref="2")))
    assert expectations(q) == {"expected_response": "4.20 euros",
                               "expected_retrieved_context": [{"content": "costs 4.20", "doc_uri": "ferry.md"}]}
    two = Query(qid="q", text="?", answers=("a", "b"), question_type="t")
    assert expectations(two) == {"expected_response": ["a", "b"]}
    own = {"expected_facts": ["x"], "guidelines": ["be brief"]}
    mine = Query(qid="q", text="?", answers=("a",), question_type="t", meta={EXPECTATIONS_META: json.dumps(own)})
    assert expectations(mine) == own


def test_a_budget_stop_behind_mlflow_s_wrapping_is_found():
    from ragbench.errors import BudgetExhaustedError
    from ragbench.judge.mlflow_scorers import _cause

    stop = BudgetExhaustedError("budget.max_calls=1 reached")
    try:
        try:
            raise stop
        except BudgetExhaustedError as exc:
            raise RuntimeError("Failed to invoke the judge via litellm") from exc
    except RuntimeError as wrapped:
        assert _cause(wrapped) is stop
    assert _cause(ValueError("a scorer's own bug")) is None
