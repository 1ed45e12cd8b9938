"""MLflow as one sink of a job's record (``ragbench.record``): params, tags, metrics, the record's files,
the case table and the dataset input.

Every tag the job sets on its run is the record's: its ``tags``, and its ``versions`` as the
``ragbench.env.*`` tags (``mlflow_tags``). What only MLflow holds is MLflow's own bookkeeping (docs/layout.md,
"A job's life"): its ``mlflow.*`` tags (source, user, parent run, run name, the list of tables),
``ragbench.owner`` (the process holding the run open, for closing stale runs), the tags a later process puts
on a run it closes as stale, and the error of a record that could not be written or logged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragbench.record import ERROR_TAG, RunRecord
from ragbench.tracking.environment import environment_tags

if TYPE_CHECKING:
    from ragbench.tracking.mlflow_tracker import MlflowTracker


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts -> dotted keys; lists are kept as JSON text."""
    out: dict[str, Any] = {}
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    if isinstance(obj, list):
        if all(isinstance(v, Mapping) for v in obj) and obj:
            for i, v in enumerate(obj):
                out.update(flatten(v, f"{prefix}{i}."))
            return out
        return {prefix[:-1]: json.dumps(obj, indent=2, sort_keys=True, default=str, ensure_ascii=False).replace("\n", "").replace("  ", "")}
    return {prefix[:-1]: obj}


CASE_TABLE = "cases_table.json"  # the cases as an MLflow table (the UI's artifact view and evaluation tab)


def start_params(record: RunRecord) -> dict[str, Any]:
    """A run's params: its resolved config as dotted keys, and the components' own (prompt hashes)."""
    return {**flatten(dict(record.config)), **record.params}


def mlflow_tags(record: RunRecord) -> dict[str, str]:
    """The tags of ``record``'s run: the environment (``ragbench.env.<name>`` per ``versions`` entry) and ``tags``."""
    return {**environment_tags(record.versions), **record.tags}


def open_run(tracker: MlflowTracker, record: RunRecord, *, parent: str | None) -> str:
    """The record's MLflow run, RUNNING, created with the record's tags so far; returns its id."""
    return tracker.start_run(run_name=record.name, parent_run_id=parent, tags=mlflow_tags(record))


def log_failure(tracker: MlflowTracker, run_id: str, record: RunRecord, *, scored: bool,
                sink_error: str | None = None) -> None:
    """A failed job's end from its record: its tags (``ragbench.error`` among them) and, when the job failed
    before its results were logged (``scored`` false), its metrics: the zero answer scores
    (``ragbench.record.failed``). ``sink_error``: why the record itself was not written or logged, tagged
    when the record names no error (it cannot hold that one)."""
    tags = {**({ERROR_TAG: sink_error} if sink_error else {}), **record.tags}
    with tracker.batched(run_id):
        tracker.set_tags(run_id, tags)
        if not scored and record.metrics:
            tracker.log_metrics(run_id, record.metrics)


def log_results(tracker: MlflowTracker, run_id: str, record: RunRecord, *, table: Sequence[Mapping[str, Any]],
                config_yaml: str) -> None:
    """A finished pipeline's results into the job's MLflow run: the record's tags, metrics and curves (one
    batch), the cases as an MLflow table, the config, and the dataset as the run's input. The record's files
    follow when the job ends (``log_files``)."""
    with tracker.batched(run_id):  # tags, metrics and curves in as few store writes as fit
        tracker.set_tags(run_id, record.tags)
        tracker.log_metrics(run_id, record.metrics)
        tracker.log_curves(run_id, record.curves)
    tracker.log_table(run_id, [{k: (json.dumps(v, default=str, ensure_ascii=False) if isinstance(v, list) else v)
                                for k, v in row.items()} for row in table], CASE_TABLE)
    tracker.log_files(run_id, {"config.yaml": config_yaml})
    digest = record.fingerprints.get("dataset_sha256", "")
    tracker.log_dataset(
        run_id, name=f"{record.dataset}-{record.variant}", digest=digest, source=record.dataset_source,
        rows=[{k: row[k] for k in ("qid", "question", "question_type", "answerable")} for row in table],
        tags={"documents": str(record.counts.get("documents", 0)), "chunks": str(record.counts.get("chunks", 0)),
              "queries": str(record.counts.get("queries", 0)),
              **{f"queries/{t}": str(n) for t, n in sorted(record.queries_by_type.items())}},
    )


def log_files(tracker: MlflowTracker, run_id: str, folder: Path) -> None:
    """The record's files as they are (``run.json``, ``cases.jsonl``), whatever way the job ended."""
    tracker.log_folder(run_id, folder)
