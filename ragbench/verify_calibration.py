"""``python -m ragbench.verify RUN_ID`` on a ``ragbench.judge calibrate`` run: its agreement and probe metrics
recomputed from its record and compared with what it logged.

The record (``ragbench.record``, kind ``calibration``) is ``run.json`` and ``cases.jsonl``, one case line per
labelled item: human label, judge score, verdict, agreement and each probe's per-item values. From the
lines and the settings in ``run.json``'s config (scale, pass_at, keys, probes, resamples, seed, level) it
recomputes every verdict from its score, then accuracy, Cohen's kappa, the confusion matrix, the agreement
per question type and each probe's statistic, with the bootstrap CIs of the same seed -- by the functions
the calibration ran (``agreement``, ``probe_stats``, ``Calibration.metrics``). It compares them with
``run.json``'s metrics and with ``calibration.json``, ``run.json`` with the run's MLflow metrics and params,
and the lines with the per-item table (``cases_table.json``). A run logged before its record (a
``case_scores.json``, ``calibration_items.json`` and no ``run.json``) is read through ``ragbench.record``'s
migration (``stored_cases``) and checked against its MLflow params and metrics. The judge's scores
themselves need the model, so they are taken as logged; the usage totals (``*_tokens``, ``cost_usd``) are not
per item in the record and are not compared.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ragbench.compare.runcases import case_columns
from ragbench.errors import ConfigError
from ragbench.judge.agreement import Agreement, agreement
from ragbench.judge.calibrate import USAGE_SUFFIXES, Calibration
from ragbench.judge.calibration_settings import Settings
from ragbench.judge.probes import DEFINITIONS, ProbeResult, probe_stats
from ragbench.record import CASES_ARTIFACT, LEGACY_SCORES, RUN_FILE, RunRecord, stored_cases
from ragbench.tracking.mlflow_sink import CASE_TABLE, flatten, start_params
from ragbench.tracking.mlflow_tracker import mlflow_name
from ragbench.tracking.mlflow_tracker import redact as param_values
from ragbench.tracking.store import sqlite_path

log = logging.getLogger(__name__)
KIND_TAG = ("ragbench.kind", "calibration")  # the tag ``ragbench.judge calibrate`` gives its runs
SUMMARY_ARTIFACT = "calibration.json"  # ragbench.judge.__main__.CALIBRATION_ARTIFACT
LEGACY_ITEMS = "calibration_items.json"  # the per-item table of a run logged before its record
ARTIFACTS = (RUN_FILE, CASES_ARTIFACT, CASE_TABLE, SUMMARY_ARTIFACT, LEGACY_SCORES, LEGACY_ITEMS)


class Checks(Protocol):
    """What is compared and what could not be (``ragbench.verify.Report``)."""

    compared: int
    mismatches: list[str]
    unchecked: list[str]

    def check(self, where: str, logged: float, recomputed: float) -> None: ...


@dataclass(frozen=True)
class CalibrationRun:
    """What verify reads of a calibration run: params, logged metrics and its artifacts (None: not there)."""

    run_id: str
    params: Mapping[str, str]
    metrics: Mapping[str, float]
    files: Mapping[str, bytes | None]
    status: str = ""  # the MLflow run's status ("": not known)


def load_calibration(run_id: str, uri: str) -> CalibrationRun | None:
    """The run when it is a calibration run; None when it is not, or cannot be read (then the job path of
    ``ragbench.verify`` says why)."""
    db = sqlite_path(uri)
    if db is not None and not db.exists():
        return None
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient(tracking_uri=uri)
    try:
        run = client.get_run(run_id)
    except MlflowException:
        return None
    if run.data.tags.get(KIND_TAG[0]) != KIND_TAG[1]:
        return None
    files: dict[str, bytes | None] = dict.fromkeys(ARTIFACTS)  # one that cannot be read: reported missing
    with tempfile.TemporaryDirectory(prefix="ragbench-verify-") as tmp:
        try:
            stored = {f.path for f in client.list_artifacts(run_id)}
            for name in ARTIFACTS:
                if name in stored:
                    files[name] = Path(client.download_artifacts(run_id, name, tmp)).read_bytes()
        except (MlflowException, OSError) as exc:
            log.warning("run %s: artifacts not readable: %s", run_id, str(exc).splitlines()[0])
    return CalibrationRun(run_id=run_id, params=dict(run.data.params), metrics=dict(run.data.metrics),
                          files=files, status=str(run.info.status))


def settings_from_params(params: Mapping[str, str]) -> Settings:
    """The run's ``Settings`` from its flattened params (ConfigError naming a param that is missing or bad)."""
    try:
        keys = {k[len("keys."):]: v for k, v in params.items() if k.startswith("keys.")}
        return Settings(scale=params["scale"], pass_at=float(params["pass_at"]), max_score=int(params["max_score"]),
                        keys=keys, probes=tuple(json.loads(params["probes"] or "[]")), repeats=int(params["repeats"]),
                        resamples=int(params["resamples"]), seed=int(params["seed"]), level=float(params["level"]),
                        workers=int(params["workers"]))
    except KeyError as exc:
        raise ConfigError(f"the run has no param {exc.args[0]!r}") from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"a settings param is not readable: {exc}") from None


def _json(data: bytes | None, name: str, checks: Checks) -> Any:
    if data is None:
        checks.unchecked.append(f"{name}: missing from the run's artifacts")
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        checks.mismatches.append(f"{name}: not JSON")
        return None


def table_rows(doc: Any) -> list[dict[str, Any]] | None:
    """Rows of an MLflow table file (``{"columns", "data"}``; a null cell: the row lacks the column)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("columns"), list) or not isinstance(doc.get("data"), list):
        return None
    cols = doc["columns"]
    if not all(isinstance(r, list) and len(r) == len(cols) for r in doc["data"]):
        return None
    return [{c: v for c, v in zip(cols, r, strict=True) if v is not None} for r in doc["data"]]


def compare_tree(where: str, got: Any, want: Any, checks: Checks) -> None:
    """Every number of ``want`` against ``got`` (to the tolerance of ``checks``), every other value equal;
    probe notes (free text naming the judge's model) are left out."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            checks.mismatches.append(f"{where}: holds {sorted(got) if isinstance(got, dict) else type(got).__name__}, "
                                     f"recomputed {sorted(want)}")
            return
        for key in want:
            if key != "note":
                compare_tree(f"{where}.{key}", got[key], want[key], checks)
    elif isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            checks.mismatches.append(f"{where}: logged {got!r}, recomputed {want!r}")
            return
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            compare_tree(f"{where}[{i}]", g, w, checks)
    elif isinstance(want, int | float) and not isinstance(want, bool):
        if isinstance(got, bool) or not isinstance(got, int | float):
            checks.mismatches.append(f"{where}: logged {got!r}, recomputed {want!r}")
        else:
            checks.check(where, float(got), float(want))
    else:
        checks.compared += 1
        if got != want:
            checks.mismatches.append(f"{where}: logged {got!r}, recomputed {want!r}")


def recompute(rows: Sequence[Mapping[str, Any]], settings: Settings, checks: Checks) -> Calibration:
    """Verdicts (checked against the rows), agreement per rubric and the probes, from the per-item rows."""
    rubrics = sorted({k[len("human/"):] for r in rows for k in r if k.startswith("human/")})
    classes = (0, 1) if settings.scale == "binary" else tuple(range(settings.max_score + 1))
    agreements: dict[str, Agreement] = {}
    failed: dict[str, int] = {}
    for rubric in rubrics:
        labelled = [r for r in rows if r.get(f"human/{rubric}") is not None]
        human = [int(r[f"human/{rubric}"]) for r in labelled]
        verdicts = []
        for r in labelled:
            score = r.get(settings.key(rubric))
            verdict = settings.verdict(None if score is None else float(score))
            where = f"item {r['qid']} {rubric}"
            checks.check(f"{where} verdict", float(r.get(f"verdict/{rubric}", math.nan)), verdict)
            checks.check(f"{where} agree", float(r.get(f"calibration/{rubric}/agree", math.nan)),
                         float(verdict == int(r[f"human/{rubric}"])))
            verdicts.append(verdict)
        failed[rubric] = sum(r.get(settings.key(rubric)) is None for r in labelled)
        agreements[rubric] = agreement(rubric, human, verdicts, [str(r["question_type"]) for r in labelled],
                                       classes=classes, resamples=settings.resamples, seed=settings.seed,
                                       level=settings.level)
    probes = {}
    for name in settings.probes:
        n, stats = probe_stats(name, rows, settings)
        probes[name] = ProbeResult(n=n, definition=DEFINITIONS[name], stats=stats)
    return Calibration(rows=tuple(dict(r) for r in rows), agreements=agreements, probes=probes, failed=failed,
                       usage={})


def check_calibration(run: CalibrationRun, checks: Checks) -> int:
    """Recomputes the run's calibration metrics into ``checks``; returns the number of labelled items."""
    files = run.files
    if files.get(CASES_ARTIFACT) is None and files.get(LEGACY_SCORES) is None:
        checks.unchecked.append(f"{CASES_ARTIFACT}: missing from the run's artifacts")
        return 0
    try:
        source, rows = stored_cases(files)
    except ValueError as exc:
        checks.mismatches.append(str(exc))
        return 0
    record = None
    if source == CASES_ARTIFACT:  # the record: run.json beside the lines
        record = _record(files.get(RUN_FILE), checks)
        if record is None:
            return len(rows)
        _check_sinks(run, record, checks)
    table_name = CASE_TABLE if record is not None else LEGACY_ITEMS
    table = _json(files.get(table_name), table_name, checks)
    if table is not None:
        items = table_rows(table)
        if items is None:
            checks.mismatches.append(f"{table_name}: not an MLflow table (columns and data)")
        else:  # the lines must hold the numbers of the per-item table
            _against_table(f"{source} against {table_name}", rows, items, checks)
    summary = _json(files.get(SUMMARY_ARTIFACT), SUMMARY_ARTIFACT, checks)
    try:
        params = run.params if record is None else {
            k: str(v) for k, v in flatten(dict(record.config)).items()}
        settings = settings_from_params(params)
    except ConfigError as exc:
        checks.unchecked.append(f"run {run.run_id}: {exc}; the calibration settings are needed to recompute")
        return len(rows)
    cal = recompute(rows, settings, checks)
    expected = cal.metrics()
    logged, where = (run.metrics, "run metric") if record is None else (record.metrics, f"{RUN_FILE} metric")
    for key, value in sorted(expected.items()):
        if key in logged:
            checks.check(f"{where} {key}", logged[key], value)
        else:
            checks.unchecked.append(f"{where} {key}: recomputed but not logged")
    for key in sorted(set(logged) - set(expected)):
        if not key.endswith(USAGE_SUFFIXES):
            checks.unchecked.append(f"{where} {key}: logged but not recomputable from the record")
    if summary is not None:
        compare_tree(SUMMARY_ARTIFACT, summary, json.loads(json.dumps(cal.summary())), checks)
    return len(rows)


def _record(data: bytes | None, checks: Checks) -> RunRecord | None:
    """The run's ``run.json`` as a calibration's record; None (said in ``checks``) when it is missing, not a
    record, or another kind's."""
    if data is None:
        checks.unchecked.append(f"{RUN_FILE}: missing from the run's artifacts")
        return None
    try:
        record = RunRecord.from_json(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        checks.mismatches.append(f"{RUN_FILE}: not a readable record ({str(exc).splitlines()[0][:120]})")
        return None
    if record.kind != "calibration":
        checks.mismatches.append(f"{RUN_FILE}: the record of a {record.kind}, not of a calibration")
        return None
    return record


def _check_sinks(run: CalibrationRun, record: RunRecord, checks: Checks) -> None:
    """MLflow holds what the record holds: the run's status, each metric (to the tolerance of ``checks``) and
    each param (the config as dotted keys and the record's params, as the run logs them)."""
    if run.status and record.status != run.status:
        checks.mismatches.append(f"{RUN_FILE} status {record.status}, MLflow run {run.status}")
    ours = {mlflow_name(k): v for k, v in record.metrics.items()}
    for key in sorted(set(run.metrics) | set(ours)):
        if key not in run.metrics or key not in ours:
            side = "MLflow" if key in run.metrics else RUN_FILE
            checks.mismatches.append(f"metric {key}: logged in {side} only")
        else:
            checks.check(f"MLflow metric {key} against {RUN_FILE}", run.metrics[key], ours[key])
    params = param_values(start_params(record))
    for key in sorted(set(params) | set(run.params)):
        checks.compared += 1
        if params.get(key) != run.params.get(key):
            checks.mismatches.append(
                f"param {key}: MLflow {run.params.get(key)!r}, {RUN_FILE} {params.get(key)!r}")


def _against_table(where: str, rows: Sequence[Mapping[str, Any]], items: Sequence[Mapping[str, Any]],
                   checks: Checks) -> None:
    """Every number of the per-item table against the same item's number in the lines."""
    got, want = case_columns(rows), case_columns(items)
    compare_tree(where, {"qid": got["qid"], "fields": {k: got["fields"].get(k) for k in want["fields"]}},
                 {"qid": want["qid"], "fields": want["fields"]}, checks)
