"""Params flattening, secret redaction, valid metric names, batched logging to a real sqlite store."""

from ragbench.tracking.mlflow_sink import flatten
from ragbench.tracking.mlflow_tracker import mlflow_name, redact


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
