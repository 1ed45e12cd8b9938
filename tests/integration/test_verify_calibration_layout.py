"""A calibration run logged before calibration wrote a record (``case_scores.json``, ``calibration.json``
and the ``calibration_items.json`` table; no ``run.json``) still passes ``python -m ragbench.verify``
against a real MLflow store, read through the record's migration (``ragbench.record.stored_cases``); an
edit fails it."""

from __future__ import annotations

import json

import pytest

from ragbench.compare.runcases import scores_document
from ragbench.judge.calibrate import calibrate
from ragbench.tracking.mlflow_sink import flatten
from ragbench.tracking.mlflow_tracker import MlflowTracker
from ragbench.verify import main as verify
from tests.unit.test_verify_calibration import JUDGE_MODEL, LABELS, SETTINGS, Judge

pytestmark = pytest.mark.slow


def test_a_calibration_run_of_the_layout_before_the_record_verifies(tmp_path, capsys):
    store = tmp_path / "mlruns"
    uri = f"sqlite:///{store}/mlflow.db"
    tracker = MlflowTracker(uri=uri, artifact_root=str(store / "artifacts"),
                            experiment="ragbench-calibration")
    cal = calibrate(LABELS, {"llm": Judge()}, SETTINGS, judge_model=JUDGE_MODEL)
    config = {k: getattr(SETTINGS, k) for k in ("scale", "pass_at", "max_score", "repeats", "resamples",
                                                 "seed", "level", "workers")}
    params = flatten({**config, "probes": list(SETTINGS.probes),
                      "keys": {"faithfulness": "judge/faithfulness"}})
    # as ragbench.judge.__main__.log_run logged a run before the record
    run_id = tracker.start_run(run_name="#0", tags={"ragbench.role": "job", "ragbench.kind": "calibration"})
    tracker.log_params(run_id, {**params, "labels.n": 20})
    tracker.log_metrics(run_id, cal.metrics())
    tracker.log_files(run_id, {"case_scores.json": json.dumps(scores_document(list(cal.rows))),
                               "calibration.json": json.dumps(cal.summary(), indent=1)}, redacted=True)
    tracker.log_table(run_id, list(cal.rows), "calibration_items.json")
    tracker.end_run(run_id, "FINISHED")

    assert verify([run_id, "--tracking-uri", uri]) == 0, capsys.readouterr().out
    assert "20 labelled items" in capsys.readouterr().out
    scores = next(p for p in store.rglob("case_scores.json") if run_id in str(p))
    doc = json.loads(scores.read_text())
    agree = doc["fields"]["calibration/faithfulness/agree"]
    agree[0] = 1 - agree[0]
    scores.write_text(json.dumps(doc))
    assert verify([run_id, "--tracking-uri", uri]) == 1
    assert "case_scores.json against calibration_items.json.fields.calibration/faithfulness/agree[0]" in (
        capsys.readouterr().out)
