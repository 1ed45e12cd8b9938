"""Issue 45.3b: a budget stop while rewriting questions stops the job (``JobStopped``: the run ends KILLED),
where another LLM failure keeps the question alone and is counted."""

from __future__ import annotations

from typing import Any

import pytest

from ragbench.errors import BudgetExhaustedError, JobStopped, LLMError
from ragbench.query.plan import plan_queries
from ragbench.query.transforms import HyDE, MultiQuery
from ragbench.types import Query

QUERIES = [
    Query(qid=f"q{i}", text=f"question {i}?", answers=("a",), question_type="single_hop") for i in range(6)
]


class Client:
    """Answers the first ``paid`` requests, then raises ``error``."""

    model = "openai/q"
    max_concurrency = 3

    def __init__(self, paid: int, error: Exception) -> None:
        self.paid, self.error, self.asked = paid, error, 0

    def complete(self, messages: Any) -> Any:
        self.asked += 1
        if self.asked > self.paid:
            raise self.error
        return type("R", (), {"text": "another way to ask"})()


@pytest.mark.parametrize("transform", [MultiQuery, HyDE])
@pytest.mark.parametrize("workers", [1, 3])
def test_a_budget_stop_mid_rewrite_stops_the_job(transform, workers):
    client = Client(
        2, BudgetExhaustedError("budget.max_calls=2 reached (2 LLM requests sent, budget.scope=job)")
    )
    with pytest.raises(
        JobStopped, match=r"stopped by budget while rewriting questions .*max_calls=2.*fix: raise"
    ):
        plan_queries(transform(client=client), QUERIES, workers=workers)


def test_another_failure_keeps_the_question_and_is_counted():
    t = MultiQuery(client=Client(2, LLMError("server down")))
    plan = plan_queries(t, QUERIES)
    assert t.failures == 4 and plan.variants[5] == ("question 5?",)
