"""The job summary's LLM judge table: coverage beside every judge score, "not judged" for coverage 0 (never
0.0000), and the sweep table's cell for a judge score a job never logged (issue 47)."""

from __future__ import annotations

import io

from rich.console import Console

from ragbench.tracking import report
from ragbench.tracking.runs_table import print_sweep_table

# 6 cases: accuracy parsed for 5 (one unjudged, counted 0 end to end), correctness for none (not logged)
METRICS = {
    "cases/total": 6.0, "cases/failed": 0.0, "cases/failure_rate": 0.0, "answer/f1": 0.31,
    "judge/accuracy": 0.625, "judge/accuracy_successful": 0.75, "judge/accuracy/judge_failed": 1 / 6,
    "judge/correctness/judge_failed": 1.0, "judge/judge_failed": 1.0, "judge/coverage": 0.0,
    "by_type/x/cases/total": 3.0, "by_type/x/judge/accuracy": 0.5, "by_type/x/judge/accuracy/judge_failed": 1 / 3,
    "by_type/y/cases/total": 3.0, "by_type/y/judge/accuracy/judge_failed": 1.0,
    "judge/claims/precision": 0.0, "judge/claims/judge_failed": 1.0,
}


def _summary(metrics: dict, monkeypatch) -> str:
    out = io.StringIO()
    monkeypatch.setattr(report, "console", Console(file=out, width=80, highlight=False, color_system=None))
    report.job_summary(title="ragbench job t", metrics=metrics, fingerprints={}, counts={"documents": 1},
                       timings={"cases": 1.0}, run_id="r1")
    return out.getvalue()


def test_judge_scores_print_their_coverage_and_coverage_0_reads_not_judged(monkeypatch):
    text = _summary(METRICS, monkeypatch)
    assert max(len(line) for line in text.splitlines()) <= 80
    lines = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") >= 4}
    acc = lines["judge/accuracy"]
    assert "0.6250" in acc and "0.7500" in acc and "83%" in acc
    assert "not judged" in lines["judge/correctness"] and "0%" in lines["judge/correctness"]
    assert "not judged" in lines["judge/claims/precision"]  # logged 0, yet no verdict parsed: not a score
    assert "0.0000" not in lines["judge/claims/precision"]
    assert sum("judge/accuracy" in line for line in text.splitlines()) == 2  # the judge table and by type
    by_type = [line for line in text.splitlines() if line.startswith("│ y ")]
    assert by_type and "not judged" in by_type[0]
    assert "0.5000" in next(line for line in text.splitlines() if line.startswith("│ x "))


def test_no_llm_judge_no_judge_table(monkeypatch):
    text = _summary({"cases/total": 2.0, "answer/f1": 0.5}, monkeypatch)
    assert "LLM judges" not in text and "not judged" not in text


def test_the_sweep_table_shows_a_dash_for_a_judge_score_a_job_never_logged():
    rows = [{"label": "llm.model=a #0", "run_id": "r0", "status": "FINISHED", "dataset": "qasper", "baseline": "",
             "answer/f1": 0.4, "judge/accuracy": 0.5},
            {"label": "llm.model=b #1", "run_id": "r1", "status": "FINISHED", "dataset": "qasper", "baseline": "",
             "answer/f1": 0.3}]  # no verdict of job 1 parsed: judge/accuracy not logged
    con = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    print_sweep_table(con, rows, "judge/accuracy", title="sweep")
    text = con.export_text()
    job1 = next(line for line in text.splitlines() if "model=b" in line)
    assert "0.0000" not in job1 and "-" in job1.split("│")[3]
    assert text.index("model=a") < text.index("model=b")  # the unjudged job ranks last, not on a 0
