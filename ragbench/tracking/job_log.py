"""Turns a JobResult into what MLflow stores: params, tags, metrics, artifacts, case table, dataset input."""

from __future__ import annotations

import functools
import getpass
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragbench import __version__
from ragbench.compare.runcases import SCORES_ARTIFACT, scores_document
from ragbench.components import JobResult
from ragbench.job_metrics import at_k_views, job_metrics, queries_by_type
from ragbench.redact import redact as redact_text
from ragbench.trace import gold_path_tags
from ragbench.tracking.case_record import CASES_ARTIFACT, case_record
from ragbench.tracking.mlflow_tracker import MlflowTracker, dumps, table_json
from ragbench.types import CaseResult


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
        return {prefix[:-1]: dumps(obj).replace("\n", "").replace("  ", "")}
    return {prefix[:-1]: obj}


@functools.lru_cache(maxsize=1)
def git_commit() -> str:
    """The commit ragbench runs from (``unknown`` outside a git checkout), ``+dirty`` when modified."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha + ("+dirty" if dirty else "")


def source_tags() -> dict[str, str]:
    """MLflow's own source tags, which its UI shows in the run list and the run page."""
    commit = git_commit()
    tags = {"mlflow.source.type": "LOCAL", "mlflow.source.name": "python -m ragbench"}
    if commit != "unknown":
        tags["mlflow.source.git.commit"] = commit.removesuffix("+dirty")
    try:
        tags["mlflow.user"] = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        pass
    return tags


def case_row(case: CaseResult, topk: int) -> dict[str, Any]:
    """One flat row per case: question, gold, answer, retrieved ids, scores, status."""
    row: dict[str, Any] = {
        "qid": case.query.qid,
        "question_type": case.query.question_type,
        "answerable": case.query.answerable,
        "question": case.query.text,
        "gold": " | ".join(case.query.answers),
        "answer": case.answer.text if case.answer else None,
        "status": case.status,
        "error_type": case.error_type,
        "error": case.error,
        "retrieved_ids": [h.chunk_id for h in case.hits[:topk]],
        "retrieved_scores": [round(h.score, 6) for h in case.hits[:topk]],
        "context_ids": [c.chunk_id for c in case.contexts],
        "context_parts": [list(c.part_ids) for c in case.contexts],  # [] = the whole context chunk
        "citations": list(case.answer.citations) if case.answer else [],
        "prompt_tokens": case.answer.usage.prompt_tokens if case.answer else 0,
        "completion_tokens": case.answer.usage.completion_tokens if case.answer else 0,
    }
    row.update({k: v for k, v in sorted(case.scores.items())})
    row.update({f"latency/{k}_ms": round(v * 1000, 3) for k, v in case.latency.items()})
    return row


CASE_TABLE = "cases_table.json"
CASE_FILES = (CASES_ARTIFACT, SCORES_ARTIFACT, CASE_TABLE)  # what case_files writes; CASE_TABLE is an MLflow table


def case_files(result: JobResult, topk: int) -> dict[str, str]:
    """The job's per-case artifacts, redacted: every case record (``cases.jsonl``), their scores in columns
    (``case_scores.json``) and the case table. Pure: ``ragbench.tracking.background`` runs it in a child."""
    ev = result.evalset
    rows = [case_row(c, topk) for c in result.cases]
    records = [{**row, **case_record(c, result.tree, result.evidence.get(c.query.qid), dataset=ev.name, topk=topk,
                                     coverage=result.coverage.get(c.query.qid))}
               for row, c in zip(rows, result.cases, strict=True)]
    jsonl = "".join(json.dumps(r, sort_keys=True, default=str, ensure_ascii=False) + "\n" for r in records)
    scores = json.dumps(scores_document(records), ensure_ascii=False, separators=(",", ":"))
    table = table_json([{k: (json.dumps(v, default=str, ensure_ascii=False) if isinstance(v, list) else v)
                         for k, v in r.items()} for r in rows])
    return {CASES_ARTIFACT: redact_text(jsonl), SCORES_ARTIFACT: redact_text(scores), CASE_TABLE: table}


def log_job(tracker: MlflowTracker, run_id: str, result: JobResult, *, resolved_cfg: Mapping[str, Any],
            config_yaml: str, topk: int, extra_tags: Mapping[str, str]) -> dict[str, Any]:
    """Logs a finished job's params, tags, metrics, config, summary and dataset input; returns the summary.
    Its case files are ``case_files``' (``JobRun.log_result`` stages them)."""
    ev = result.evalset
    tags = {
        "ragbench.dataset_sha256": result.fingerprints["dataset_sha256"],
        "ragbench.index_sha256": result.fingerprints["index_sha256"],
        "ragbench.dataset": ev.name,
        "ragbench.dataset_variant": ev.variant,
        "ragbench.version": __version__,
        "ragbench.git_commit": git_commit(),  # with +dirty; mlflow.source.git.commit has the bare sha
        **{f"ragbench.dataset.{k}": v for k, v in ev.tags.items()},
        **gold_path_tags(c.trace for c in result.cases),  # trace=true: where gold first entered / was lost
        **extra_tags,
    }
    tracker.set_tags(run_id, tags)
    metrics = job_metrics(result, topk)
    by_type = queries_by_type(ev)
    _, curves = at_k_views(result.metrics, topk)
    tracker.log_metrics(run_id, metrics)
    tracker.log_curves(run_id, curves)
    summary = {
        "dataset": ev.name, "variant": ev.variant, "fingerprints": dict(result.fingerprints),
        "counts": dict(result.counts), "timings": dict(result.timings), "metrics": metrics,
        "dataset_stats": dict(ev.stats), "queries_by_type": dict(by_type), "files_read": list(ev.files),
    }
    tracker.log_files(run_id, {"config.yaml": config_yaml, "summary.json": dumps(summary)})
    tracker.log_dataset(
        run_id, name=f"{ev.name}-{ev.variant}", digest=result.fingerprints["dataset_sha256"],
        source=ev.root or ev.name,
        rows=[{"qid": q.qid, "question": q.text, "question_type": q.question_type, "answerable": q.answerable}
              for q in ev.queries],
        tags={"documents": str(result.counts["documents"]), "chunks": str(result.counts["chunks"]),
              "queries": str(result.counts["queries"]),
              **{f"queries/{t}": str(n) for t, n in sorted(by_type.items())}},
    )
    return summary
