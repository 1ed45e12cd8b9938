"""``python -m ragbench.verify`` reads the run's record: ``run.json``'s metrics must equal the recomputation
and MLflow's, its config MLflow's params. An edited metric, a ``run.json`` cut to 300 bytes or replaced by
``[]``, an edited config: each fails (exit 1) with a line naming ``run.json`` and what differs; the intact
record passes. The store is replaced by the artifacts' bytes (``fetch_run``)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ragbench import verify
from ragbench.record import RunRecord
from ragbench.tracking.mlflow_sink import start_params
from ragbench.tracking.mlflow_tracker import redact as param_values
from tests.unit.tracking.test_verify_input import RUN, artifacts  # noqa: F401 - the toy job's artifacts


@pytest.fixture(scope="module")
def recorded(artifacts) -> verify.RunArtifacts:  # noqa: F811 - the fixture above
    """The toy job's artifacts as a job with a record stores them: run.json, and MLflow its sink."""
    record = RunRecord(name="topk=2 #0", job_hash="h", config={"retrieval": {"topk": 2}, "dataset": {"name": "toy"}},
                       metrics=dict(artifacts.metrics), status="FINISHED")
    return dataclasses.replace(artifacts, scores=None, run_json=record.to_json().encode(),
                               params=param_values(start_params(record)), status="FINISHED")


def _edit(change):
    def apply(data: bytes) -> bytes:
        doc = json.loads(data)
        change(doc)
        return json.dumps(doc, indent=1).encode()
    return apply


def _verify(monkeypatch, capsys, art: verify.RunArtifacts) -> tuple[int, str, str]:
    monkeypatch.setattr(verify, "fetch_run", lambda run_id, uri: art)
    code = verify.main([RUN, "--tracking-uri", "sqlite:///unused.db"])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out, out.err


def test_an_intact_record_passes(monkeypatch, capsys, recorded):
    code, out, err = _verify(monkeypatch, capsys, recorded)
    assert code == 0 and "OK: every metric matches to 1e-9" in out, out + err


# (case id, change to run.json, change to MLflow's params, the line that names what differs)
EDITS = [
    ("f1-edited", _edit(lambda d: d["metrics"].__setitem__("answer/f1", 0.99)), None,
     "run metric answer/f1: run.json 0.99, MLflow "),
    ("metric-added", _edit(lambda d: d["metrics"].__setitem__("answer/bonus", 1.0)), None,
     "run.json metric answer/bonus: 1, not in MLflow"),
    ("config-edited", _edit(lambda d: d["config"]["retrieval"].__setitem__("topk", 20)), None,
     "run.json config retrieval.topk: '20', MLflow param '2'"),
    ("param-added", None, lambda p: {**p, "llm.model": "x"}, "run.json config llm.model: absent, MLflow param 'x'"),
    ("status-edited", _edit(lambda d: d.__setitem__("status", "RUNNING")), None,
     "run.json status RUNNING, MLflow run FINISHED"),
]


@pytest.mark.parametrize(("change", "params", "line"), [e[1:] for e in EDITS], ids=[e[0] for e in EDITS])
def test_an_edited_record_fails_naming_what_differs(monkeypatch, capsys, recorded, change, params, line):
    art = dataclasses.replace(recorded, run_json=change(recorded.run_json) if change else recorded.run_json,
                              params=params(recorded.params) if params else recorded.params)
    code, out, _ = _verify(monkeypatch, capsys, art)
    assert code == 1 and "FAILED" in out and "OK" not in out, out
    assert any(row.strip().startswith(line) for row in out.splitlines()), out


def test_the_forged_value_is_caught_even_where_mlflow_agrees(monkeypatch, capsys, recorded):
    """run.json and MLflow both edited to the same answer/f1: the recomputation from the cases differs."""
    art = dataclasses.replace(recorded, run_json=_edit(lambda d: d["metrics"].__setitem__("answer/f1", 0.99))(
        recorded.run_json), metrics={**recorded.metrics, "answer/f1": 0.99})
    code, out, _ = _verify(monkeypatch, capsys, art)
    assert code == 1 and "run metric answer/f1: logged 0.99, recomputed" in out, out


@pytest.mark.parametrize(("data", "phrase"), [
    (lambda d: d[:300], "run.json is cut off (the file is truncated)"),
    (lambda d: b"[]", "run.json is an array, not a ragbench-run/2 record"),
    (lambda d: b"{}", "run.json is not a ragbench-run/2 record"),
    (lambda d: _edit(lambda r: r.__setitem__("metrics", {"answer/f1": "0.99"}))(d),
     "run.json: metric 'answer/f1' is a string, expected a number"),
    (lambda d: b'{"format": "ragbench-run/2", "x": ' + b"[" * 100_000 + b"}", "run.json is nested too deep"),
], ids=["cut-to-300-bytes", "an-array", "empty-object", "metric-a-string", "nested-too-deep"])
def test_a_run_json_that_is_not_a_record_is_one_line(monkeypatch, capsys, recorded, data, phrase):
    code, out, err = _verify(monkeypatch, capsys, dataclasses.replace(recorded, run_json=data(recorded.run_json)))
    assert code == 1 and "OK" not in out
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"ragbench.verify: FAILED: run {RUN}: "), err
    assert phrase in err and "fix: " in err, err
