"""Params flattening, secret redaction, valid metric names, batched logging to a real sqlite store."""

from ragbench.tracking.job_log import flatten
from ragbench.tracking.mlflow_tracker import MlflowTracker, mlflow_name, redact


def test_flatten_nested_config():
    flat = flatten({"a": {"b": 1, "c": [1, 2]}, "d": None, "e": {"f": [{"g": 1}]}})
    assert flat == {"a.b": 1, "a.c": "[1,2]", "d": None, "e.f.0.g": 1}


def test_secrets_are_masked_but_env_var_names_kept():
    out = redact({"llm.api_key": "sk-123", "llm.api_key_env": "OPENAI_API_KEY", "judge.token": "t",
                  "retrieval.topk": 5, "llm.api_base": None})
    assert out["llm.api_key"] == "***" and out["judge.token"] == "***"
    assert out["llm.api_key_env"] == "OPENAI_API_KEY" and out["retrieval.topk"] == "5"
    assert out["llm.api_base"] == ""


def test_metric_names_are_sanitised():
    assert mlflow_name("by_type/yes/no?/answer/f1") == "by_type/yes/no_/answer/f1"


def test_batched_metrics_reach_the_store(tmp_path):
    tracker = MlflowTracker(uri=f"sqlite:///{tmp_path}/db/mlflow.db", artifact_root=str(tmp_path / "art"),
                            experiment="t")
    run_id = tracker.start_run(run_name="r", tags={"x": "1"})
    metrics = {f"m/{i}": float(i) for i in range(2500)}  # several log_batch calls
    tracker.log_metrics(run_id, metrics)
    tracker.log_params(run_id, {f"p.{i}": i for i in range(250)})
    tracker.log_files(run_id, {"a/b.txt": "hello"})
    tracker.end_run(run_id, "FINISHED")
    run = tracker.client.get_run(run_id)
    assert run.data.metrics == metrics and len(run.data.params) == 250
    assert run.info.status == "FINISHED"
    assert [a.path for a in tracker.client.list_artifacts(run_id, "a")] == ["a/b.txt"]
