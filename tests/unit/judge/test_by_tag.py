"""by_tag/<tag>/<metric>: a case counts in each of its tags (the custom format's ``tags``), as by_type does for
its one type; the keys are declared (as their base metric) and verify treats them as group copies."""

from __future__ import annotations

import io

from rich.console import Console

from ragbench.judge.aggregate import aggregate
from ragbench.metric_keys import metric_info
from ragbench.tracking import report
from ragbench.types import Answer, CaseResult, Query
from ragbench.verify import GROUPS


def _case(qid: str, f1: float, tags: tuple[str, ...] = (), status: str = "ok") -> CaseResult:
    query = Query(qid=qid, text="?", answers=("a",), question_type="fact", meta={"tags": tags} if tags else {})
    return CaseResult(query=query, hits=(), contexts=(), answer=Answer(text="a", model="m"),
                      scores={"answer/f1": f1, "answer/citation_missing": 1.0 - f1}, status=status)


def test_a_case_counts_in_each_of_its_tags():
    out = aggregate([_case("1", 1.0, ("Travel", "piers")), _case("2", 0.0, ("travel",)), _case("3", 0.5),
                     _case("4", 0.25, ("piers",), status="failed")])
    assert out["by_tag/travel/answer/f1"] == 0.5  # cases 1 and 2 ("Travel" and "travel" are one tag)
    assert out["by_tag/piers/answer/f1"] == 0.5  # case 1 (1.0) and the failed case 4 (0 end to end)
    assert out["by_tag/piers/answer/f1_successful"] == 1.0
    assert out["by_tag/piers/cases/total"] == 2.0
    assert not any(k.startswith("by_tag/") and "/3/" in k for k in out)  # untagged case 3 in no tag group
    # answer/citation_missing: the mean over the cases carrying it (only citation_required ones do)
    assert aggregate([_case("1", 1.0), _case("2", 0.0), _case("3", 0.0)])["answer/citation_missing"] == 2 / 3


def test_by_tag_keys_are_declared_and_grouped():
    assert metric_info("by_tag/travel/answer/f1").definition == metric_info("answer/f1").definition
    assert metric_info("answer/citation_support_rate").kind == "diagnostic"
    assert metric_info("answer/raw_f1").kind == "diagnostic"
    assert "by_tag/" in GROUPS


def test_the_job_summary_prints_a_by_tag_table(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(report, "console", Console(file=out, width=100, highlight=False, color_system=None))
    metrics = {"cases/total": 3.0, "cases/failed": 0.0, "answer/f1": 0.5,
               **aggregate([_case("1", 1.0, ("travel",)), _case("2", 0.0, ("travel", "finance"))])}
    report.job_summary(title="ragbench job dataset=custom", metrics=metrics, fingerprints={}, counts={},
                       timings={}, run_id=None)
    table = out.getvalue()[out.getvalue().index("by tag"):]
    rows = {line.split()[1]: line for line in table.splitlines() if line.startswith("│")}
    assert set(rows) == {"finance", "travel"} and "0.5000" in rows["travel"] and "0.0000" in rows["finance"]
