"""Which runs to compare, read from the MLflow store the jobs log to (a sqlite file or a server)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragbench.compare.runcases import SCORES_ARTIFACT, RunCases, from_rows, from_scores_document
from ragbench.errors import ConfigError
from ragbench.jsonio import loads_bounded
from ragbench.record import CASES_ARTIFACT, RUN_FILE, RecordError, RunRecord, case_row, cases_run_id
from ragbench.stages import encode_only
from ragbench.tracking import reach
from ragbench.tracking.mlflow_sink import flatten, quiet_downloads
from ragbench.tracking.mlflow_tracker import client_for
from ragbench.tracking.run_records import _local_folder, record_of
from ragbench.tracking.runs_table import baseline_kind
from ragbench.tracking.store import (
    sqlite_path,
    tracking_defaults,  # noqa: F401 - the compare CLI's default store
)

MIN_PREFIX = 6  # characters of a run id that name it (as --baseline: ragbench.compare.comparison.pair_up)


def open_store(uri: str) -> Any:
    """An MlflowClient on ``uri``; a sqlite store that does not exist yet is a usage error, not a new store."""
    path = sqlite_path(uri)
    if path is not None and not path.exists():
        raise ConfigError(f"no MLflow store at {path} (tracking uri {uri}); run from the folder "
                          "the jobs ran in, or pass --tracking-uri")
    return client_for(uri, reach.default_timeout(), key="--tracking-uri")


def _experiment_id(client: Any, experiment: str, uri: str) -> str:
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise ConfigError(f"no experiment {experiment!r} in {uri}; pass --experiment (the jobs' tracking.experiment)")
    return str(exp.experiment_id)


def _search(client: Any, exp_id: str, filter_string: str, what: str, **kwargs: Any) -> list[Any]:
    from mlflow.exceptions import MlflowException

    try:
        return list(client.search_runs([exp_id], filter_string=filter_string, **kwargs))
    except MlflowException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{what}: MLflow refused the filter {filter_string!r}: {first}") from None


def find_runs(client: Any, uri: str, experiment: str, *, sweep: str | None = None, run_ids: Sequence[str] = (),
              filter_string: str | None = None) -> tuple[list[Any], list[str]]:
    """The selected MLflow runs (oldest first) and notes. ``sweep`` is a parent run id or ``latest``."""
    from mlflow.exceptions import MlflowException

    notes: list[str] = []
    if run_ids:
        runs = []
        every: list[Any] | None = None  # the experiment's runs, read once for the first id prefix
        for rid in run_ids:
            try:
                runs.append(client.get_run(rid))
                continue
            except MlflowException:
                if len(rid) >= 32:
                    raise ConfigError(f"--runs: no run {rid!r} in {uri}; run ids are in the MLflow UI or "
                                      "`ragbench.compare --sweep` output") from None
            if every is None:
                every = _search(client, _experiment_id(client, experiment, uri), "", "--runs", max_results=50000)
            runs.append(by_prefix(rid, every, uri))
    else:
        exp_id = _experiment_id(client, experiment, uri)
        if filter_string:
            runs = _search(client, exp_id, f"{filter_string} and tags.`ragbench.role` = 'job'", "--filter",
                           max_results=5000)
            if not runs:
                raise ConfigError(f"--filter {filter_string!r} matches no job run in experiment {experiment!r} of "
                                  f"{uri}; params are flattened config keys in backticks, e.g. "
                                  "params.`retrieval.topk` = '5'")
            notes.append(f"runs: the {len(runs)} jobs matching {filter_string!r}")
        else:
            if not sweep or sweep == "latest":
                parents = _search(client, exp_id, "tags.`ragbench.role` = 'sweep'", "--sweep", max_results=1,
                                  order_by=["attributes.start_time DESC"])
                if not parents:
                    raise ConfigError(f"no sweep in experiment {experiment!r} of {uri}; run one "
                                      "(python -m ragbench -m ...) or select runs with --runs / --filter")
                sweep = str(parents[0].info.run_id)
            runs = _search(client, exp_id, f"tags.mlflow.parentRunId = '{sweep}'", "--sweep", max_results=5000)
            if not runs:
                raise ConfigError(f"--sweep {sweep}: no job runs under that parent in {uri}; "
                                  "give the sweep's parent run id (its run name is 'sweep <time>')")
            notes.append(f"runs: the {len(runs)} jobs of sweep {sweep}")
    encoded = [r for r in runs if encode_only(r.data.tags)]  # stages=encode jobs: vectors only, no metric to compare
    if encoded:
        notes.append(f"skipped (stages=encode, vectors only): {', '.join(str(r.info.run_name) for r in encoded)}")
        runs = [r for r in runs if not encode_only(r.data.tags)]
    skipped = [r for r in runs if r.info.status != "FINISHED"]
    if skipped:
        notes.append("skipped (not FINISHED): " + ", ".join(f"{r.info.run_name} ({r.info.status})" for r in skipped))
    runs = sorted((r for r in runs if r.info.status == "FINISHED"), key=lambda r: (r.info.start_time or 0))
    if not runs:
        raise ConfigError(f"no FINISHED run among the {len(skipped)} selected; nothing to compare")
    return runs, notes


def by_prefix(prefix: str, runs: Sequence[Any], uri: str) -> Any:
    """The one run whose id starts with ``prefix`` (as ``--baseline`` accepts one); a named error for none
    or several."""
    if len(prefix) < MIN_PREFIX:
        raise ConfigError(f"--runs: {prefix!r} is too short to name a run; give at least {MIN_PREFIX} characters "
                          "of its id")
    hits = [r for r in runs if str(r.info.run_id).startswith(prefix)]
    if not hits:
        raise ConfigError(f"--runs: no run {prefix!r} in {uri}; run ids are in the MLflow UI or "
                          "`ragbench.compare --sweep` output")
    if len(hits) > 1:
        shown = ", ".join(f"{r.info.run_id} ({r.info.run_name})" for r in hits[:5])
        raise ConfigError(f"--runs: the prefix {prefix!r} matches {len(hits)} runs ({shown}{', ...' if len(hits) > 5 else ''}); "
                          "give more characters of the id")
    return hits[0]


def load_cases(client: Any, run: Any) -> RunCases:
    """A run's cases as RunCases, from its record: ``run.json`` and ``cases.jsonl`` (``ragbench.record``). A run
    logged before the record is read from its MLflow run and its compact ``case_scores.json`` (or, older
    still, its ``cases.jsonl``): the same numbers."""
    rid = str(run.info.run_id)
    holder = cases_run_id(run)
    tags, params = run.data.tags, run.data.params
    topk = params.get("retrieval.topk")
    meta = {"name": str(run.info.run_name or rid),
            "dataset": tags.get("ragbench.dataset") or params.get("dataset.name") or "unknown",
            "dataset_sha256": tags.get("ragbench.dataset_sha256", ""),
            "topk": int(topk) if topk and str(topk).isdigit() else None, "metrics": dict(run.data.metrics),
            "baseline": baseline_kind(tags), "params": dict(params)}  # a run logged before the record
    names = _artifact_names(client, holder)
    record = record_for_run(client, run, names)
    if record is not None:  # a ragbench-run/2 record: what the job was and found comes from the record itself
        topk = (record.config.get("retrieval") or {}).get("topk")
        meta.update(dataset=record.dataset or meta["dataset"], metrics=dict(record.metrics) or meta["metrics"],
                    dataset_sha256=record.fingerprints.get("dataset_sha256", ""), baseline=baseline_kind(record.tags),
                    topk=int(topk) if isinstance(topk, int) else meta["topk"], params=record_params(record))
    elif SCORES_ARTIFACT in names:  # the layout before the record: its compact scores document
        text = _download(client, run, SCORES_ARTIFACT)
        try:
            doc = loads_bounded(text, where=f"run {rid}: {SCORES_ARTIFACT}")
        except json.JSONDecodeError as exc:  # NestedTooDeep too
            raise ConfigError(f"run {rid}: {SCORES_ARTIFACT} is not JSON ({exc.msg}); "
                              "its cases.jsonl holds the same numbers") from None
        return from_scores_document(doc, run_id=rid, source="mlflow", **meta)
    return from_rows(case_rows(_download(client, run, CASES_ARTIFACT), rid), run_id=rid, **meta)


def _artifact_names(client: Any, holder: str) -> set[str]:
    try:
        return {f.path for f in client.list_artifacts(holder)}
    except Exception:  # noqa: BLE001 - any store or transport error: the download that follows names it
        return set()


def record_for_run(client: Any, run: Any, names: set[str] | None = None) -> RunRecord | None:
    """The record of an MLflow run, read by ``run_records.record_of`` (the one way from a run to its record)
    from the artifact store, which holds the record's bytes (the job's output folder keeps a pointer:
    docs/layout.md, "A job's life"); for a copy resume put in a later sweep, its origin's record. None for a
    run logged before the record (no ``run.json``); a ConfigError naming the run when the file is not a
    record. ``names``: the holder's artifact names, when the caller listed them already."""
    if names is not None and RUN_FILE not in names:
        return None
    try:
        return record_of(client, run)
    except RecordError as exc:
        raise ConfigError(str(exc)) from None


def record_params(record: RunRecord) -> dict[str, str]:
    """The record's config as dotted keys with text values: what its run logged as MLflow params
    (``mlflow_sink.start_params``), read from the record itself."""
    return {k: str(v) for k, v in flatten(dict(record.config)).items()}


def case_rows(text: str, run_id: str) -> list[dict[str, Any]]:
    """The rows of a run's ``cases.jsonl``, each line read by ``ragbench.record.case_row`` (older layouts
    migrated; the row, not a CaseRecord built from it and turned back into a row); a ConfigError naming the
    line and what is wrong (not JSON, nested too deep, a field mistyped)."""
    rows = []
    lines = text.split("\n")
    for n, line in enumerate(lines, start=1):
        if line.strip():
            try:
                rows.append(case_row(line, where=f"run {run_id}: {CASES_ARTIFACT} line {n}", cut=n == len(lines)))
            except RecordError as exc:
                raise ConfigError(f"{exc}; fix: rerun the job (its stage cache makes that cheap)") from None
    return rows


def _download(client: Any, run: Any, artifact: str) -> str:
    """The text of one of the run's case artifacts (held by ``cases_run_id(run)``): read in place when the
    store keeps artifacts on this machine's disk (as ``record_of`` reads ``run.json``; a copy's files are hard
    links to its origin's), else downloaded through ``client``."""
    rid = str(run.info.run_id)
    local = _local_folder(run)
    if local is not None and (local / artifact).is_file():
        return (local / artifact).read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="ragbench-compare-") as tmp:
        try:
            with quiet_downloads():
                path = client.download_artifacts(cases_run_id(run), artifact, dst_path=tmp)
        except Exception as exc:  # noqa: BLE001 - any store or transport error: the run cannot be compared
            raise ConfigError(f"run {rid} ({run.info.run_name}): no {artifact} artifact ({type(exc).__name__}); "
                              "only ragbench job runs can be compared") from None
        return Path(path).read_text(encoding="utf-8")
