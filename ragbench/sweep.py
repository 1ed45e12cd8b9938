"""Hydra callback for ``-m`` sweeps: one parent MLflow run, every job a child, a comparison table at the end."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ragbench import interrupts, redact, session
from ragbench.budget_file import FILE as BUDGET_FILE
from ragbench.budget_file import LedgerFile
from ragbench.compare.analysis import log_sweep_report
from ragbench.errors import RagbenchError, Reported, coded
from ragbench.stages import encode_only
from ragbench.tracking.mlflow_tracker import dumps
from ragbench.tracking.owner import owner, owner_gone
from ragbench.tracking.progress import job_started, write_sweep_size
from ragbench.tracking.reach import is_server, public_uri
from ragbench.tracking.report import console, rank_within_dataset
from ragbench.tracking.run_names import job_labels, read_sweep_keys, split_overrides, write_sweep_keys  # noqa: F401 - split_overrides, job_labels: re-exported
from ragbench.tracking.run_records import RecordedRun, recorded
from ragbench.tracking.runs_table import (  # noqa: F401 - ranking_metric, RANK_FALLBACK: re-exported
    AUTO,
    DOC_LEAD,
    KEY_METRICS,
    RANK_FALLBACK,
    axis_params,
    baseline_kind,
    csv_text,
    print_sweep_table,
    ranking_metric,
    record_rows,
)
from ragbench.tracking.store import OUTPUT_FIX, writable_folder
from ragbench.ui import base_url, save_sweep_view, view_url

log = logging.getLogger(__name__)

PARENT_FILE = "ragbench_parent_run_id"
HYDRA_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")


def close_open_parents(status: str) -> None:
    """Ends every sweep parent this process opened and has not closed (an interrupt, an error, exit): the
    session's parents (``ragbench.session.Parents``; an exit closes them FAILED)."""
    session.current().parents.close_all(status)


def _fail(message: str) -> None:
    """One line, then ``Reported`` (exit 1): Hydra turns a callback's Exception into a warning and carries on."""
    log.error("%s", message)
    raise Reported(1)


def register_secrets(config: DictConfig) -> None:
    """Registers the secrets in the command line and the composed config (before anything is written)."""
    redact.register_overrides(str(o) for o in (OmegaConf.select(config, "hydra.overrides.task") or []))
    container = OmegaConf.to_container(config, resolve=False)
    assert isinstance(container, dict)
    container.pop("hydra", None)
    try:
        redact.check_config(container)
    except RagbenchError:
        pass  # the job refuses it with the same error, recorded in its run


def parent_run_id(sweep_dir: str | Path) -> str | None:
    """The sweep's parent run id: this process's own sweep first (basic launcher), else the file written
    by ``on_multirun_start`` (jobs in launcher worker processes)."""
    own = session.current().parents.run_id(str(Path(sweep_dir).resolve()))
    if own is not None:
        return own
    p = Path(sweep_dir) / PARENT_FILE
    return p.read_text().strip() if p.exists() else None


def in_this_process(parent: str) -> bool:
    """Whether ``parent`` is a sweep whose callback runs in this process (the basic launcher's jobs)."""
    return session.current().parents.owns(parent)


def shared_ledger(sweep_dir: str | Path, parent: str | None) -> LedgerFile:
    """The budget file the sweep's worker processes share (``ragbench.budget_file``), in its folder."""
    return LedgerFile(Path(sweep_dir) / BUDGET_FILE, sweep=parent or "", owner=owner(), gone=owner_gone)


ACCOUNTING = ("tokens/", "cost/", "saved/", "llm/")  # summed over the sweep's jobs on the parent run


def sweep_accounting(children: Sequence[RecordedRun]) -> dict[str, float]:
    """Every job's LLM accounting totals (ragbench.budget.accounting_metrics), as its record holds them,
    summed for the parent run."""
    out: dict[str, float] = {}
    for run in children:
        for key, value in run.metrics.items():
            if key.startswith(ACCOUNTING) and not key.endswith(("_mean", "cache_hits")):
                out[key] = out.get(key, 0.0) + float(value)
    return out


class MlflowSweepCallback(Callback):
    """Opens the parent run before the first job and closes it after the last, logging the table."""

    def __init__(self, *, sort_by: str = AUTO, compare_report: bool = True) -> None:
        self.sort_by = sort_by
        self.compare_report = compare_report  # hydra.callbacks.mlflow_sweep.compare_report=false skips it
        self._tracker: Any = None
        self._run_id: str | None = None

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """A single run: secrets registered and its output folder checked before Hydra writes to it."""
        register_secrets(config)
        try:
            writable_folder(Path(str(config.hydra.run.dir)), "the run's output folder (hydra.run.dir)", OUTPUT_FIX)
        except RagbenchError as exc:
            _fail(coded(exc))

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Masks secrets in the files Hydra wrote before the job (``.hydra/*.yaml``, ``multirun.yaml``) and
        logs "job 2/6: ..." in a sweep."""
        register_secrets(config)
        job_started(config)
        out = OmegaConf.select(config, "hydra.runtime.output_dir")
        sub = OmegaConf.select(config, "hydra.output_subdir")
        paths = [Path(str(out)) / str(sub) / name for name in HYDRA_FILES] if out and sub else []
        if OmegaConf.select(config, "hydra.mode") == RunMode.MULTIRUN:
            paths.append(Path(str(config.hydra.sweep.dir)) / "multirun.yaml")
        for path in paths:
            redact.redact_file(path)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        register_secrets(config)
        sweep_dir = Path(str(config.hydra.sweep.dir))
        overrides = list(OmegaConf.to_container(config.hydra.overrides.task, resolve=True) or [])
        try:
            writable_folder(sweep_dir, "the sweep's output folder (hydra.sweep.dir)", OUTPUT_FIX)
            self._tracker = instantiate(config.tracking)
            self._tracker.close_stale_runs()
            self._run_id = self._tracker.start_run(
                run_name=f"sweep {sweep_dir.name}",
                tags={"ragbench.role": "sweep", "ragbench.sweep_dir": str(sweep_dir.resolve()),
                      "ragbench.sweep_overrides": " ".join(map(str, overrides))},
            )
        except RagbenchError as exc:
            _fail(coded(exc))
        assert self._run_id is not None
        session.current().parents.opened(str(sweep_dir.resolve()), self._run_id, self._tracker)
        (sweep_dir / PARENT_FILE).write_text(self._run_id)
        write_sweep_keys(sweep_dir, overrides)  # jobs' run names lead with these (ragbench.tracking.run_names)
        write_sweep_size(config, sweep_dir)
        log.info("sweep parent run %s", self._run_id)

    def _close_if_open(self, status: str) -> None:
        if self._run_id is not None and self._tracker is not None:
            try:
                session.current().parents.closing(self._run_id)
                self._tracker.end_run(self._run_id, status)
            finally:
                self._run_id = None

    def _print_url(self, params: list[str], metrics: list[str]) -> None:
        """The sweep's jobs in the MLflow UI (``ragbench.ui``): a view saved on the experiment, and its URL."""
        try:
            uri = str(self._tracker.uri)
            base = public_uri(uri.rstrip("/")) if is_server(uri) else base_url()  # no user:password shown
            exp_id = self._tracker.experiment_id()
            key = save_sweep_view(self._tracker.client, exp_id, str(self._run_id), params, metrics)
        except Exception as exc:  # noqa: BLE001 - a URL is never worth failing the sweep
            log.warning("no MLflow view of the sweep: %s", exc)
            return
        how = "run `ragbench ui` in this folder, then open" if base == base_url() else "open"
        console.print(f"this sweep's jobs in MLflow: {how} {view_url(base, exp_id, key)}", markup=False,
                      soft_wrap=True)

    @staticmethod
    def _jobs(config: DictConfig) -> int:
        """The number of jobs in the sweep's grid (from its command-line overrides)."""
        from hydra.core.override_parser.overrides_parser import OverridesParser

        parsed = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
        total = 1
        for o in parsed:
            total *= len(list(o.sweep_string_iterator())) if o.is_sweep_override() else 1
        return total

    def _workers_stopped(self, config: DictConfig) -> str | None:
        """The budget message the sweep's worker processes left in its shared file, if they reached it."""
        try:
            return shared_ledger(str(config.hydra.sweep.dir), self._run_id).read().stopped
        except RagbenchError as exc:
            log.warning("%s", coded(exc))
            return None

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """The table, the report and the URL; a store that fails here is one line and exit 1 (Hydra turns a
        callback's exception into a warning and exit 0)."""
        try:
            self._multirun_end(config)
        except RagbenchError as exc:
            _fail(coded(exc))
        except Exception as exc:  # noqa: BLE001 - MLflow's own (a server gone): one line, not a warning
            where = public_uri(str(getattr(self._tracker, "uri", "")))
            _fail(f"the sweep's summary was not logged to {where}: "
                  f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}; fix: check that the tracking "
                  "server is up, then rerun the same command (finished jobs are reused)")

    def _multirun_end(self, config: DictConfig) -> None:
        redact.redact_file(Path(str(config.hydra.sweep.dir)) / "multirun.yaml")
        if self._run_id is None:
            return
        interrupts.check()  # a safe point: after the last job, before the table and the report
        # MLflow finds the jobs, their records say what they were and found (ragbench.tracking.run_records);
        # oldest first: a tie on the ranking metric goes to the earlier job, as compare's default baseline does
        found = sorted(self._tracker.search_children(self._run_id), key=lambda r: r.info.start_time or 0)
        children = recorded(self._tracker.client, found)
        for child in children:
            if child.problem:  # a record that is missing or not a record: that job counts as FAILED
                log.error("%s", child.problem)
        rows = []
        swept = read_sweep_keys(config.hydra.sweep.dir)  # what the command line varies: its columns first
        differing = axis_params([run.params for run in children], swept)  # one param per swept axis
        for run in children:
            row: dict[str, Any] = {"run": run.run_name, "status": run.status, "run_id": run.run_id,
                                   "dataset": run.params.get("dataset.name", "")}
            row["params"] = {k: run.params.get(k) for k in differing}
            row["baseline"] = baseline_kind(run.tags)  # retrieval=none | oracle
            for m in (*KEY_METRICS, self.sort_by, *DOC_LEAD):
                if m in run.metrics:
                    row[m] = run.metrics[m]
            rows.append(row)
        sort_by = ranking_metric(rows, self.sort_by)
        rows = rank_within_dataset(rows, sort_by)
        labels = job_labels({r["run_id"]: r["run"] for r in rows})
        for r in rows:
            r["label"] = labels[r["run_id"]]
            r["job"] = labels[r["run_id"]] + (f" [baseline: {r['baseline']}]" if r.get("baseline") else "")
        table = [{**{k: v for k, v in r.items() if k not in ("params", "label")}, "params": dumps(r["params"])}
                 for r in rows]
        self._tracker.log_table(self._run_id, table or [{"run": "none"}], "sweep_comparison.json")
        self._tracker.log_files(self._run_id, {"sweep_comparison.json": dumps(rows)}, artifact_path="summary")
        self._tracker.log_files(self._run_id, {"runs.csv": csv_text(record_rows(children), swept)})
        self._tracker.log_metrics(self._run_id, {"sweep/jobs": len(rows),
                                                 "sweep/failed_jobs": sum(r["status"] != "FINISHED" for r in rows)})
        self._tracker.log_metrics(self._run_id, sweep_accounting(children))
        ranked = sort_by if self.sort_by in (sort_by, AUTO) else f"{sort_by} (no job has {self.sort_by})"
        print_sweep_table(console, rows, sort_by, title=f"sweep: {len(rows)} jobs, best {ranked} first within each "
                                                        "dataset")
        try:  # the statistical comparison report (ragbench.compare) on the parent run; never fails the sweep
            if self.compare_report and not all(encode_only(c.tags) for c in children):  # encode: vectors
                log_sweep_report(self._tracker, self._run_id, sort_by=self.sort_by)  # its baseline: the table's best
        except Exception as exc:  # noqa: BLE001
            log.warning("comparison report not logged to the sweep run: %s: %s", type(exc).__name__, exc)
        shown = [k for k in differing if not k.startswith(("hydra.", "cache.", "tracking."))]
        self._print_url(shown, sorted({k for c in children for k in c.metrics}))
        failed = [r["run"] for r in rows if r["status"] != "FINISHED"]
        stopped = session.current().ledger.stopped or self._workers_stopped(config)
        self._close_if_open("FAILED" if failed else "FINISHED")
        if stopped is not None:  # one line: the budget, not a list of "failed" jobs
            log.error("sweep stopped by budget: %s; %d of %d jobs ran; fix: raise budget.* and rerun the same "
                      "command (cached answers and verdicts are reused)", stopped, len(rows),
                      max(self._jobs(config), len(rows)))
            raise Reported(1)
        if failed:
            # a sweep with failed jobs must exit non-zero (CI smoke sweeps rely on it): Reported passes
            # Hydra's guard (a callback's Exception becomes a warning) and __main__ exits 1
            log.error("%d of %d jobs failed: %s; each job's error is in its MLflow run (tag ragbench.error) "
                      "and in its log under %s", len(failed), len(rows), ", ".join(failed), config.hydra.sweep.dir)
            raise Reported(1)
