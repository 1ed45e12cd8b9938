"""Per-turn groups and per-conversation figures (ragbench.judge.conversation), as the job aggregates them."""

from __future__ import annotations

import pytest

from ragbench.judge.aggregate import aggregate
from ragbench.judge.conversation import conversation_metrics, turn_bucket, turn_groups
from ragbench.metric_keys import metric_info
from ragbench.types import Answer, CaseResult, Query


def _case(conv: str | None, turn: int, hit: float | None, f1: float, *, status: str = "ok",
          followup: str | None = None) -> CaseResult:
    meta = {"followup": followup} if followup else {}
    q = Query(qid=f"{conv}#{turn}" if conv else f"q{turn}", text="?", answers=("a",), question_type="t",
              conversation=conv, turn=turn if conv else 0, meta=meta)
    scores = {"answer/f1": f1, **({"retrieval/hit_at_5": hit} if hit is not None else {})}
    return CaseResult(query=q, hits=(), contexts=(), answer=Answer(text="a", model="m"), scores=scores,
                      status=status)


CASES = [
    _case("a", 1, 1.0, 1.0), _case("a", 2, 0.0, 0.2, followup="follow-up"), _case("a", 3, 1.0, 0.9),
    _case("b", 1, 1.0, 0.8), _case("b", 2, 1.0, 0.6, status="failed"),
    _case(None, 7, 0.0, 0.0),  # a question that is no turn: in no conversation figure
]


def test_turn_buckets_and_groups():
    assert [turn_bucket(t) for t in (1, 2, 3, 9)] == ["1", "2", "3plus", "3plus"]
    groups = dict(turn_groups(CASES))
    assert {k: [c.query.qid for c in v] for k, v in groups["by_turn"].items()} == {
        "1": ["a#1", "b#1"], "2": ["a#2", "b#2"], "3plus": ["a#3"]}
    assert {k: len(v) for k, v in groups["by_followup"].items()} == {"first": 2, "follow-up": 1, "unmarked": 2}
    assert turn_groups([_case(None, 1, 1.0, 1.0)]) == []


def test_conversation_figures():
    m = conversation_metrics(CASES)
    assert m["conversation/count"] == 2 and m["conversation/turns_mean"] == 2.5
    # hit: a = [1, 0, 1] (mean 2/3, fails at turn 2), b = [1, 1] (a failed case keeps its retrieval figure)
    assert m["conversation/mean/retrieval/hit_at_5"] == pytest.approx((2 / 3 + 1) / 2)
    assert m["conversation/all_correct/retrieval/hit_at_5"] == 0.5
    assert m["conversation/first_fail/retrieval/hit_at_5"] == 2.0
    # f1 end to end: a = [1, .2, .9], b = [.8, 0 (failed)]: both fail, at turns 2 and 2
    assert m["conversation/mean/answer/f1"] == pytest.approx(((1 + .2 + .9) / 3 + .4) / 2)
    assert m["conversation/all_correct/answer/f1"] == 0.0
    assert m["conversation/first_fail/answer/f1"] == 2.0


def test_aggregate_reports_them_and_every_key_is_declared():
    out = aggregate(CASES)
    assert out["by_turn/2/answer/f1"] == pytest.approx((0.2 + 0.0) / 2)
    assert out["by_followup/follow-up/retrieval/hit_at_5"] == 0.0
    assert out["conversation/all_correct/retrieval/hit_at_5"] == 0.5
    for key in out:
        assert metric_info(key) is not None  # an undeclared key raises
    plain = aggregate([_case(None, 1, 1.0, 1.0)])
    assert not any(k.startswith(("by_turn/", "by_followup/", "conversation/")) for k in plain)


def test_the_job_summary_has_a_by_turn_table(monkeypatch):
    import io

    from rich.console import Console

    from ragbench.tracking import report

    out = io.StringIO()
    monkeypatch.setattr(report, "console", Console(file=out, width=80, highlight=False, color_system=None))
    report.job_summary(title="job", metrics=aggregate(CASES), fingerprints={}, counts={}, timings={}, run_id=None)
    text = out.getvalue()
    assert "by conversation turn" in text and "3plus" in text
    assert all(len(line) <= 80 for line in text.splitlines())
