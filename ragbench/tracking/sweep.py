"""Hydra callback for ``-m`` sweeps: one parent MLflow run, every job a child, a comparison table at the end."""

from __future__ import annotations

import atexit
import logging
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ragbench.tracking.progress import job_started, write_sweep_size
from ragbench.tracking.report import comparison_table, rank_within_dataset

log = logging.getLogger(__name__)

PARENT_FILE = "ragbench_parent_run_id"
KEY_METRICS = {  # metric -> short column label for the terminal
    # the job's own top-k under one name: in a top-k sweep these columns differ, @5 would not
    "retrieval/hit_at_topk": "hit@k", "retrieval/recall_at_topk": "recall@k", "retrieval/mrr": "mrr",
    "context/evidence_recall": "ctx ev.rec", "answer/f1": "f1", "answer/em": "em", "judge/accuracy": "judge acc",
    "cases/failed": "failed",
}


def parent_run_id(sweep_dir: str | Path) -> str | None:
    """The sweep's parent run id, written by ``on_multirun_start``."""
    p = Path(sweep_dir) / PARENT_FILE
    return p.read_text().strip() if p.exists() else None


def split_overrides(text: str) -> list[str]:
    """Hydra's ``override_dirname`` split at its top-level commas (``reranker=[a,b]`` stays whole)."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return [o for o in out if o]


def job_labels(run_names: dict[str, str]) -> dict[str, str]:
    """Short terminal labels: ``#n`` plus only the overrides that differ between the sweep's jobs
    (run names are ``#n key=value,key=value``; a value every job shares is noise in a comparison)."""
    parsed: dict[str, tuple[str, list[str]]] = {}
    for run_id, name in run_names.items():
        num, _, rest = (name or "").partition(" ")
        parsed[run_id] = (num, split_overrides(rest))
    values: dict[str, set[str]] = {}
    shared_by = Counter(item for _, items in parsed.values() for item in set(items))
    for _, items in parsed.values():
        for item in items:
            key, _, value = item.partition("=")
            values.setdefault(key, set()).add(value)
    out = {}
    for run_id, (num, items) in parsed.items():
        keep = [i for i in items if len(values[i.partition("=")[0]]) > 1 or shared_by[i] < len(parsed)]
        out[run_id] = " ".join([num, *keep]).strip() or num
    return out


class MlflowSweepCallback(Callback):
    """Opens the parent run before the first job and closes it after the last, logging the table."""

    def __init__(self, *, sort_by: str = "answer/f1") -> None:
        self.sort_by = sort_by
        self._tracker: Any = None
        self._run_id: str | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._tracker = instantiate(config.tracking)
        sweep_dir = Path(str(config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        overrides = list(OmegaConf.to_container(config.hydra.overrides.task, resolve=True) or [])
        self._run_id = self._tracker.start_run(
            run_name=f"sweep {sweep_dir.name}",
            tags={"ragbench.role": "sweep", "ragbench.sweep_dir": str(sweep_dir.resolve()),
                  "ragbench.sweep_overrides": " ".join(map(str, overrides))},
        )
        (sweep_dir / PARENT_FILE).write_text(self._run_id)
        write_sweep_size(config, sweep_dir)
        atexit.register(self._close_if_open, "KILLED")
        log.info("sweep parent run %s", self._run_id)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        job_started(config)  # "job 2/6: ..." in the job's log

    def _close_if_open(self, status: str) -> None:
        if self._run_id is not None and self._tracker is not None:
            try:
                self._tracker.end_run(self._run_id, status)
            finally:
                self._run_id = None

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self._run_id is None:
            return
        children = self._tracker.search_children(self._run_id)
        rows = []
        varying: dict[str, set[str]] = {}
        for run in children:
            for k, v in run.data.params.items():
                varying.setdefault(k, set()).add(v)
        differing = sorted(k for k, vals in varying.items() if len(vals) > 1)
        for run in children:
            row: dict[str, Any] = {"run": run.info.run_name, "status": run.info.status, "run_id": run.info.run_id,
                                   "dataset": run.data.params.get("dataset.name", "")}
            row["params"] = {k: run.data.params.get(k) for k in differing}
            for m in KEY_METRICS:
                if m in run.data.metrics:
                    row[m] = run.data.metrics[m]
            rows.append(row)
        rows = rank_within_dataset(rows, self.sort_by)
        labels = job_labels({r["run_id"]: r["run"] for r in rows})
        for r in rows:
            r["job"] = labels[r["run_id"]]
        from ragbench.tracking.mlflow_tracker import dumps

        table = [{**{k: v for k, v in r.items() if k != "params"}, "params": dumps(r["params"])} for r in rows]
        self._tracker.log_table(self._run_id, table or [{"run": "none"}], "sweep_comparison.json")
        self._tracker.log_files(self._run_id, {"sweep_comparison.json": dumps(rows)}, artifact_path="summary")
        self._tracker.log_metrics(self._run_id, {"sweep/jobs": len(rows),
                                                 "sweep/failed_jobs": sum(r["status"] != "FINISHED" for r in rows)})
        shown = {"rank": "rank", "dataset": "dataset", "job": "job", "status": "status",
                 **{m: label for m, label in KEY_METRICS.items() if any(m in r for r in rows)}}
        comparison_table(rows, shown, title=f"sweep: {len(rows)} jobs, best {self.sort_by} first within each dataset")
        failed = [r["run"] for r in rows if r["status"] != "FINISHED"]
        self._close_if_open("FAILED" if failed else "FINISHED")
        if failed:
            # Hydra turns callback exceptions into warnings; a sweep with failed jobs must exit non-zero
            # (CI smoke sweeps rely on it), so report and leave with status 1.
            log.error("%d of %d jobs failed: %s; each job's error is in its MLflow run (tag ragbench.error) "
                      "and in its log under %s", len(failed), len(rows), ", ".join(failed), config.hydra.sweep.dir)
            sys.exit(1)
