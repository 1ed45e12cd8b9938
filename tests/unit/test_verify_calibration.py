"""ragbench.verify on a calibration run, without MLflow: the run's record as ``judge calibrate`` writes and
logs it (``run.json`` + ``cases.jsonl``, through the jobs' MLflow sink) reproduces every logged metric
(accuracy, kappa, per-type agreement, probes, CIs of the same seed), and an edit of 1e-7 to any of them, a
damaged ``run.json`` or one that disagrees with MLflow is caught. A run logged before its record
(``case_scores.json`` + ``calibration_items.json``, the ``run`` fixture) still verifies, through the
record's migration."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from ragbench.compare.runcases import scores_document
from ragbench.judge.calibrate import Settings, calibrate
from ragbench.judge.labels import LabelledItem, LabelSet
from ragbench.record import LEGACY_SCORES, RecordWriter, RunRecord
from ragbench.tracking.mlflow_sink import flatten, log_files, log_results, start_params
from ragbench.tracking.mlflow_tracker import redact, table_json
from ragbench.verify import Report
from ragbench.verify_calibration import (
    SUMMARY_ARTIFACT,
    CalibrationRun,
    check_calibration,
    settings_from_params,
)

SETTINGS = Settings(resamples=300, seed=3, repeats=2, workers=1)
JUDGE_MODEL = "openai/judge-a"


def _item(i: int) -> LabelledItem:
    ctx = tuple((f"t{i}", f"EVIDENCE-{i}" if j == 0 else f"passage {i}.{j}") for j in range(1 + (i % 3 == 0)))
    return LabelledItem(item_id=f"i{i}", question=f"q{i}?", answer=f"answer {i}", contexts=ctx, gold=(),
                        question_type="abc"[i % 3], generator=JUDGE_MODEL if i % 4 == 0 else "openai/other",
                        labels={"faithfulness": int(i % 5 != 0)})


class Judge:
    """Prefers the evidence first, wobbles on repeats, is kind to long answers and fails item 7."""

    def __init__(self):
        self.asked: dict[str, itertools.count] = {}

    def judge(self, query, contexts, answer):
        if query.qid == "i7":
            return {}
        n = next(self.asked.setdefault(query.qid, itertools.count()))
        score = 0.5 + 0.25 * contexts[0].text.startswith("EVIDENCE") + 0.25 * (len(answer.text) > 12)
        score -= 0.25 * (n % 2 and int(query.qid[1:]) % 2)
        return {"judge/faithfulness": score, "judge/prompt_tokens": 7.0}


SCORES_ARTIFACT, ITEMS_ARTIFACT = LEGACY_SCORES, "calibration_items.json"  # the layout before the record
LABELS = LabelSet(path="mem.jsonl", sha256="0" * 64, items=tuple(_item(i) for i in range(20)))


@pytest.fixture(scope="module")
def run() -> CalibrationRun:
    """A calibration run logged before its record: case_scores.json and calibration_items.json."""
    labels = LABELS
    cal = calibrate(labels, {"llm": Judge()}, SETTINGS, judge_model=JUDGE_MODEL)
    assert set(cal.probes) == {"position", "verbosity", "repeat", "self_preference"}
    assert all(p.stats for p in cal.probes.values()), {k: p.note for k, p in cal.probes.items()}
    cfg = {k: getattr(SETTINGS, k) for k in ("scale", "pass_at", "max_score", "repeats", "resamples", "seed",
                                              "level", "workers")}
    params = flatten({**cfg, "probes": list(SETTINGS.probes), "keys": {"faithfulness": "judge/faithfulness"}})
    files = {SCORES_ARTIFACT: json.dumps(scores_document(list(cal.rows))),
             SUMMARY_ARTIFACT: json.dumps(cal.summary(), indent=1), ITEMS_ARTIFACT: table_json(list(cal.rows))}
    return CalibrationRun(run_id="r1", params={k: str(v) for k, v in params.items()}, metrics=cal.metrics(),
                          files={k: v.encode() for k, v in files.items()})


def _check(run: CalibrationRun) -> Report:
    report = Report()
    assert check_calibration(run, report) == 20
    return report


def test_the_artifacts_reproduce_every_logged_metric(run):
    assert settings_from_params(run.params).key("faithfulness") == SETTINGS.key("faithfulness")
    assert vars(settings_from_params(run.params)) == {**vars(SETTINGS), "keys": {"faithfulness": "judge/faithfulness"}}
    report = _check(run)
    assert report.ok, (report.mismatches, report.unchecked)
    assert report.worst[0] <= 1e-12
    recomputed = {w.removeprefix("run metric ") for w in _where(run)}
    usage = {"judge/prompt_tokens"}
    assert recomputed == set(run.metrics) - usage  # every logged metric but the usage total is recomputed
    assert {"calibration/faithfulness/kappa_ci_low", "probe/self_preference/bias_ci_high",
            "by_type/b/calibration/faithfulness/kappa", "probe/repeat/std"} <= recomputed


def _where(run: CalibrationRun) -> list[str]:
    seen: list[str] = []

    class Spy(Report):
        def check(self, where, logged, recomputed):
            seen.append(where)
            super().check(where, logged, recomputed)

    check_calibration(run, Spy())
    return [w for w in seen if w.startswith("run metric ")]


def _edit(run: CalibrationRun, name: str, change) -> CalibrationRun:
    doc = json.loads(run.files[name])
    change(doc)
    return CalibrationRun(run_id=run.run_id, params=run.params, metrics=run.metrics,
                          files={**run.files, name: json.dumps(doc).encode()})


def test_an_edit_of_1e7_to_any_artifact_or_metric_is_caught(run):
    def kappa(doc):
        doc["agreement"]["faithfulness"]["kappa"]["high"] += 1e-7

    report = _check(_edit(run, SUMMARY_ARTIFACT, kappa))
    assert report.mismatches == [f"{SUMMARY_ARTIFACT}.agreement.faithfulness.kappa.high: logged "
                                 f"{json.loads(run.files[SUMMARY_ARTIFACT])['agreement']['faithfulness']['kappa']['high'] + 1e-7!r}, "
                                 f"recomputed {json.loads(run.files[SUMMARY_ARTIFACT])['agreement']['faithfulness']['kappa']['high']!r}"]

    def delta(doc):
        col = doc["fields"]["probe/position/delta"]
        at = next(i for i, v in enumerate(col) if v is not None)
        col[at] += 1e-7

    report = _check(_edit(run, SCORES_ARTIFACT, delta))
    assert any(m.startswith(f"{SCORES_ARTIFACT} against {ITEMS_ARTIFACT}.fields.probe/position/delta[") for m in report.mismatches)
    assert any(m.startswith("run metric probe/position/delta:") for m in report.mismatches)

    def verdict(doc):  # a verdict its score does not give
        doc["data"][0][doc["columns"].index("verdict/faithfulness")] ^= 1

    assert not _check(_edit(run, ITEMS_ARTIFACT, verdict)).ok
    metrics = {**run.metrics, "calibration/faithfulness/accuracy": run.metrics["calibration/faithfulness/accuracy"] + 1e-7}
    report = _check(CalibrationRun(run_id="r1", params=run.params, metrics=metrics, files=run.files))
    assert [m.split(":")[0] for m in report.mismatches] == ["run metric calibration/faithfulness/accuracy"]


def test_what_cannot_be_checked_fails_the_run(run):
    report = _check(CalibrationRun(run_id="r1", params=run.params, metrics={**run.metrics, "probe/extra/n": 1.0},
                                   files={**run.files, SUMMARY_ARTIFACT: None}))
    assert not report.ok and report.mismatches == []
    assert f"{SUMMARY_ARTIFACT}: missing from the run's artifacts" in report.unchecked
    assert "run metric probe/extra/n: logged but not recomputable from the record" in report.unchecked
    params = {k: v for k, v in run.params.items() if k != "seed"}
    report = _check(CalibrationRun(run_id="r1", params=params, metrics=run.metrics, files=run.files))
    assert any("no param 'seed'" in u for u in report.unchecked)


class Store:
    """What ``judge calibrate`` logs, in memory: the MlflowTracker methods the jobs' sink calls."""

    def __init__(self) -> None:
        self.params: dict[str, str] = {}
        self.metrics: dict[str, float] = {}
        self.files: dict[str, bytes] = {}

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        self.params.update(redact(params))  # as MlflowTracker.log_params stores them (None: "")

    def log_metrics(self, run_id: str, metrics: Mapping[str, float]) -> None:
        self.metrics.update(metrics)

    @contextlib.contextmanager
    def batched(self, run_id: str) -> Iterator[None]:
        yield

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        pass

    def log_curves(self, run_id: str, curves: Mapping[str, Any]) -> None:
        pass

    def log_dataset(self, run_id: str, **kwargs: Any) -> None:
        pass

    def log_table(self, run_id: str, rows: Any, name: str) -> None:
        self.files[name] = table_json(list(rows)).encode()

    def log_files(self, run_id: str, files: Mapping[str, str], **kwargs: Any) -> None:
        self.files.update({k: v.encode() for k, v in files.items()})

    def log_folder(self, run_id: str, folder: Any) -> None:
        self.files.update({p.name: p.read_bytes() for p in folder.iterdir()})

    uri = "sqlite:///mlruns/mlflow.db"

    def stored_files(self, run_id: str) -> tuple[str, dict[str, int]]:
        return f"mem://{run_id}", {name: len(data or b"") for name, data in self.files.items()}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> CalibrationRun:
    """A calibration run as ``judge calibrate`` writes and logs it now (``ragbench.judge.__main__``)."""
    from ragbench.judge.__main__ import CALIBRATION_ARTIFACT, record_calibration

    cal = calibrate(LABELS, {"llm": Judge()}, SETTINGS, judge_model=JUDGE_MODEL)
    config = {k: getattr(SETTINGS, k) for k in ("scale", "pass_at", "max_score", "repeats", "resamples",
                                                 "seed", "level", "workers")}
    config.update(probes=list(SETTINGS.probes), keys={"faithfulness": "judge/faithfulness"}, limit=None)
    record = RunRecord(name="#0", job_hash="h", config=config, kind="calibration", params={"labels.n": 20})
    store = Store()
    store.log_params("r2", start_params(record))
    writer = RecordWriter(tmp_path_factory.mktemp("record"), record)
    record = record_calibration(writer, record, LABELS, cal)
    log_results(store, "r2", record, table=writer.table)  # type: ignore[arg-type]
    store.log_files("r2", {CALIBRATION_ARTIFACT: json.dumps(cal.summary(), indent=1)})
    writer.finish(record.ended("FINISHED"))
    log_files(store, "r2", writer.folder)  # type: ignore[arg-type]
    return CalibrationRun(run_id="r2", params=store.params, metrics=store.metrics, files=store.files)


def _replace(run: CalibrationRun, name: str, data: bytes | None) -> CalibrationRun:
    return CalibrationRun(run_id=run.run_id, params=run.params, metrics=run.metrics,
                          files={**run.files, name: data})


def test_a_calibration_writes_a_record_that_reproduces_every_metric(recorded):
    assert {"run.json", "cases.jsonl", "cases_table.json", SUMMARY_ARTIFACT} <= set(recorded.files)
    assert SCORES_ARTIFACT not in recorded.files  # nothing writes the pre-record format
    record = RunRecord.from_json(recorded.files["run.json"].decode())
    assert record.kind == "calibration" and record.status == "FINISHED" and record.dataset == "mem"
    assert dict(record.metrics) == recorded.metrics  # MLflow's metrics are the record's
    lines = [json.loads(x) for x in recorded.files["cases.jsonl"].decode().splitlines()]
    assert [x["qid"] for x in lines] == [f"i{i}" for i in range(20)]
    assert "judge/faithfulness" not in lines[7] and lines[7]["verdict/faithfulness"] == 0  # no verdict given
    assert lines[0]["human/faithfulness"] == 0 and lines[0]["generator"] == JUDGE_MODEL
    assert lines[1]["question"] == "q1?" and lines[1]["answer"] == "answer 1"
    report = _check(recorded)
    assert report.ok, (report.mismatches, report.unchecked)
    assert report.worst[0] <= 1e-12


def test_an_edited_record_fails(recorded):
    doc = json.loads(recorded.files["run.json"])
    doc["metrics"]["calibration/faithfulness/accuracy"] += 1e-7
    report = _check(_replace(recorded, "run.json", json.dumps(doc).encode()))
    assert sorted(m.split(":")[0] for m in report.mismatches) == [
        "MLflow metric calibration/faithfulness/accuracy against run.json",
        "run.json metric calibration/faithfulness/accuracy"]

    lines = [json.loads(x) for x in recorded.files["cases.jsonl"].decode().splitlines()]
    lines[3]["probe/position/delta"] += 1e-7
    edited = "".join(json.dumps(x) + "\n" for x in lines).encode()
    report = _check(_replace(recorded, "cases.jsonl", edited))
    assert "cases.jsonl against cases_table.json.fields.probe/position/delta[3]" in [
        m.split(":")[0] for m in report.mismatches]
    assert any(m.startswith("run.json metric probe/position/delta:") for m in report.mismatches)

    doc = json.loads(recorded.files["run.json"])
    doc["config"]["seed"] = 4  # the settings the run did not use
    report = _check(_replace(recorded, "run.json", json.dumps(doc).encode()))
    assert "param seed: MLflow '3', run.json '4'" in report.mismatches

    failed = CalibrationRun(run_id="r2", params=recorded.params, metrics=recorded.metrics,
                            files=recorded.files, status="FAILED")
    assert _check(failed).mismatches == ["run.json status FINISHED, MLflow run FAILED"]


@pytest.mark.parametrize("data,phrase", [
    (b"[]", "run.json: not a readable record ("),
    (None, "run.json: missing from the run's artifacts"),
    ("cut", "run.json: not a readable record ("),
    ("job", "run.json: the record of a job, not of a calibration"),
])
def test_a_damaged_or_foreign_record_is_one_line(recorded, data, phrase):
    full = recorded.files["run.json"]
    if data == "cut":
        data = full[:300]
    elif data == "job":
        data = full.replace(b'"kind": "calibration"', b'"kind": "job"')
    report = Report()
    check_calibration(_replace(recorded, "run.json", data), report)
    assert not report.ok
    assert [m for m in report.mismatches + report.unchecked if m.startswith(phrase)], (report.mismatches,
                                                                                       report.unchecked)
