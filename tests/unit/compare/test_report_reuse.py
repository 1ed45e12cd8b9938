"""A rerun whose jobs all resumed copies the earlier sweep's report instead of recomputing it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from ragbench.compare import analysis
from ragbench.record import REUSED_FROM


def _run(run_id: str, name: str, tags: dict[str, str] | None = None, status: str = "FINISHED") -> SimpleNamespace:
    return SimpleNamespace(info=SimpleNamespace(run_id=run_id, run_name=name, status=status),
                           data=SimpleNamespace(tags=tags or {}))


def test_a_resumed_copy_has_the_key_of_the_run_it_copies():
    first = [_run("a1", "topk=3 #0"), _run("b1", "topk=5 #1")]
    copies = [_run("b2", "topk=5 #1", {REUSED_FROM: "b1"}), _run("a2", "topk=3 #0", {REUSED_FROM: "a1"})]
    assert analysis.report_key(first, 2000) == analysis.report_key(copies, 2000)
    # a job that ran again, another name, other resamples: another report
    assert analysis.report_key(first, 2000) != analysis.report_key([first[0], _run("b3", "topk=5 #1")], 2000)
    assert analysis.report_key(first, 2000) != analysis.report_key([first[0], _run("b1", "topk=10 #1")], 2000)
    assert analysis.report_key(first, 2000) != analysis.report_key(first, 500)


class FakeTracker:
    def __init__(self, runs: list[SimpleNamespace]) -> None:
        self.runs, self.tags = runs, {}
        self.client = self

    def runs_with_tag(self, key: str, value: str) -> list[SimpleNamespace]:
        return [r for r in self.runs if r.data.tags.get(key) == value]

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        self.tags[run_id] = tags

    def download_artifacts(self, run_id: str, path: str, dst: str) -> str:
        (Path(dst) / path).mkdir(parents=True)
        (Path(dst) / path / "report.md").write_text(f"report of {run_id}")
        return str(Path(dst) / path)

    def log_artifacts(self, run_id: str, local: str, artifact_path: str) -> None:
        self.logged = (run_id, sorted(p.name for p in Path(local).iterdir()), artifact_path)


def test_the_earlier_report_is_copied_not_recomputed(monkeypatch):
    jobs = [_run("a2", "topk=3 #0", {REUSED_FROM: "a1"})]
    key = analysis.report_key(jobs, 2000)
    tracker = FakeTracker([_run("p-failed", "sweep", {analysis.REPORT_KEY: key}, status="FAILED"),
                           _run("p1", "sweep", {analysis.REPORT_KEY: key})])
    monkeypatch.setattr("ragbench.compare.analysis.find_runs", lambda *a, **k: (jobs, []))

    def no_recompute(*a, **k):
        raise AssertionError("the report was recomputed")

    monkeypatch.setattr(analysis, "analyse", no_recompute)
    tracker.uri, tracker.experiment = "sqlite://", "ragbench"
    analysis.log_sweep_report(tracker, "p2")
    assert tracker.logged == ("p2", ["report.md"], "compare")
    assert tracker.tags["p2"] == {analysis.REPORT_KEY: key, analysis.REPORT_FROM: "p1"}


def test_no_earlier_report_means_none():
    tracker = FakeTracker([_run("p1", "sweep", {analysis.REPORT_KEY: "other"})])
    assert analysis._earlier_report(tracker, "k", "p2") is None
    tracker = FakeTracker([_run("p2", "sweep", {analysis.REPORT_KEY: "k"})])
    assert analysis._earlier_report(tracker, "k", "p2") is None  # the sweep's own run is not "earlier"
