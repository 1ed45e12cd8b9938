"""ragbench.verify on a calibration run, without MLflow: the run's artifacts as ``judge calibrate`` logs them
reproduce every logged metric (accuracy, kappa, per-type agreement, probes, CIs of the same seed), and an
edit of 1e-7 to any of them is caught."""

from __future__ import annotations

import itertools
import json

import pytest

from ragbench.compare.runcases import SCORES_ARTIFACT, scores_document
from ragbench.judge.calibrate import Settings, calibrate
from ragbench.judge.labels import LabelledItem, LabelSet
from ragbench.tracking.mlflow_sink import flatten
from ragbench.tracking.mlflow_tracker import table_json
from ragbench.verify import Report
from ragbench.verify_calibration import (
    ITEMS_ARTIFACT,
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


@pytest.fixture(scope="module")
def run() -> CalibrationRun:
    labels = LabelSet(path="mem.jsonl", sha256="0" * 64, items=tuple(_item(i) for i in range(20)))
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
    assert "run metric probe/extra/n: logged but not recomputable from the artifacts" in report.unchecked
    params = {k: v for k, v in run.params.items() if k != "seed"}
    report = _check(CalibrationRun(run_id="r1", params=params, metrics=run.metrics, files=run.files))
    assert any("no param 'seed'" in u for u in report.unchecked)
