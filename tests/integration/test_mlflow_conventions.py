"""MLflow's own conventions, so its UI opens on the runs and draws something worth looking at."""

from __future__ import annotations

import pytest

from tests.fixtures.jobs import run_job

pytestmark = pytest.mark.slow


def test_a_job_logs_curves_by_k_fixed_names_and_standard_tags(tmp_path):
    run, client = run_job(["dataset=qasper", "dataset.sample_size=6", "retrieval=bm25", "retrieval.topk=10"], tmp_path)
    assert run.info.status == "FINISHED"
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    tags, m = run.data.tags, run.data.metrics
    assert tags["mlflow.source.type"] == "LOCAL" and tags["mlflow.source.name"] == "python -m ragbench"
    if tags["ragbench.git_commit"] != "unknown":
        assert tags["mlflow.source.git.commit"] == tags["ragbench.git_commit"].removesuffix("+dirty")
    # the @k curves: one point per reported cut-off, k as the step, equal to the per-k metrics
    for name in ("hit", "recall", "ndcg"):
        history = client.get_metric_history(run.info.run_id, f"retrieval/{name}_at_k_curve")
        assert sorted(p.step for p in history) == [1, 3, 5, 10]
        assert all(p.value == pytest.approx(m[f"retrieval/{name}_at_{p.step}"]) for p in history)
    # the job's own cut-off under one fixed name, and the compact headline set
    assert m["retrieval/hit_at_topk"] == m["retrieval/hit_at_10"]
    assert m["headline/hit_at_topk"] == m["retrieval/hit_at_10"]
    assert m["headline/answer_f1"] == m["answer/f1"] and m["headline/mrr_at_10"] == m["retrieval/mrr_at_10"]
    # every other metric stays a single value at step 0
    assert [p.step for p in client.get_metric_history(run.info.run_id, "retrieval/mrr_at_10")] == [0]


def test_case_table_is_the_table_mlflow_log_table_writes(tmp_path, monkeypatch):
    """ragbench writes a run's table itself (no DataFrame, listing and run read per job): MLflow's
    ``load_table`` reads it back as the frame ``MlflowClient.log_table`` would have stored, and the
    ``mlflow.loggedArtifacts`` tag lists it the same way. Only the digits differ: pandas keeps 10."""
    import json

    import pandas as pd
    from mlflow.utils.mlflow_tags import MLFLOW_LOGGED_ARTIFACTS

    from ragbench.tracking.mlflow_tracker import LOGGED_ARTIFACTS, MlflowTracker

    assert LOGGED_ARTIFACTS == MLFLOW_LOGGED_ARTIFACTS
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")  # load_table searches with it
    tracker = MlflowTracker(uri=f"sqlite:///{tmp_path}/mlflow.db", artifact_root=str(tmp_path / "artifacts"),
                            experiment="t")
    rows = [{"qid": "a", "answer/f1": 0.5, "n": 3, "ok": True, "ids": '["c1", "c2"]', "error": None},
            {"qid": "b", "answer/f1": float("nan"), "n": 4, "ok": False, "ids": "[]", "extra": "x"},
            {"qid": "c", "answer/f1": 0.25, "n": 5, "ok": True, "ids": '["c3"]', "error": "boom"}]
    ours = tracker.start_run(run_name="ours", tags={})
    tracker.log_table(ours, rows, "cases_table.json")
    theirs = tracker.start_run(run_name="theirs", tags={})
    tracker.client.log_table(theirs, data=pd.DataFrame(rows), artifact_file="cases_table.json")
    a = tracker.client.load_table(tracker.experiment_id(), "cases_table.json", run_ids=[ours])
    b = tracker.client.load_table(tracker.experiment_id(), "cases_table.json", run_ids=[theirs])
    pd.testing.assert_frame_equal(a, b)
    tag = {r: json.loads(tracker.client.get_run(r).data.tags[MLFLOW_LOGGED_ARTIFACTS]) for r in (ours, theirs)}
    assert tag[ours] == tag[theirs] == [{"path": "cases_table.json", "type": "table"}]
    tracker.log_table(ours, rows[:1], "second.json")  # a second table is added to the list, not put in its place
    assert json.loads(tracker.client.get_run(ours).data.tags[MLFLOW_LOGGED_ARTIFACTS]) == [
        {"path": "cases_table.json", "type": "table"}, {"path": "second.json", "type": "table"}]
    raw = json.loads((tmp_path / "artifacts" / "t" / ours / "artifacts" / "cases_table.json").read_text())
    assert raw["columns"] == ["qid", "answer/f1", "n", "ok", "ids", "error", "extra"]
    assert raw["data"][1][1] is None  # NaN is null: JSON has no NaN


def test_case_table_masks_secrets_in_values_and_secret_named_columns(tmp_path, monkeypatch):
    """The table is written from redacted rows: a registered secret in a value, a secret-named
    assignment in text and a secret-named column are masked in the file; a clean table is untouched."""
    import datetime
    import json

    from ragbench import redact
    from ragbench.tracking.mlflow_tracker import MlflowTracker

    monkeypatch.setattr(redact, "_secrets", set())
    monkeypatch.setattr(redact, "_pattern", None)
    redact.register("sk-table-secret-0123456789")
    tracker = MlflowTracker(uri=f"sqlite:///{tmp_path}/mlflow.db", artifact_root=str(tmp_path / "artifacts"),
                            experiment="t")
    tables = {
        "value": [{"qid": "a", "error": "401 for key sk-table-secret-0123456789"}],
        "assignment": [{"qid": "a", "error": "bad request: password=hunter2"}],
        "column": [{"qid": "a", "api_key": "plain-value-here"}],
        "object": [{"qid": "a", "when": datetime.date(2026, 1, 1), "note": "token: abc123"}],
        "key": [{"qid": "a", "by sk-table-secret-0123456789": "v"}],  # a column name holding a secret
        "clean": [{"qid": "a", "answer": "Lisbon", "n": 2}],
    }
    for name, rows in tables.items():
        run = tracker.start_run(run_name=name, tags={})
        tracker.log_table(run, rows, "t.json")
        text = (tmp_path / "artifacts" / "t" / run / "artifacts" / "t.json").read_text()
        doc = json.loads(text)
        assert "sk-table-secret" not in text and "hunter2" not in text and "plain-value-here" not in text
        assert "abc123" not in text
        if name == "clean":
            assert doc == {"columns": ["qid", "answer", "n"], "data": [["a", "Lisbon", 2]]}
        else:
            assert redact.MASK in text, name
