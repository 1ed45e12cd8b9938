"""One run's cases as arrays (from its ``cases.jsonl``, or a baseline file), and the baseline file itself."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragbench.compare.metrics import MetricSpec
from ragbench.errors import ConfigError
from ragbench.jsonio import loads_bounded
from ragbench.judge.aggregate import metric_name
from ragbench.repeats import record_runs
from ragbench.tracking.run_names import parse_run_name

BASELINE_FORMAT = "ragbench-baseline/1"
# overrides that say where results go, not what was run: left out of the config a baseline is matched on
_CHUNK_LEVEL = "retrieval/chunk/"  # left out of baseline files: the evidence-unit metrics are the headline
_WHERE_KEYS = ("cache.", "tracking.", "hydra.", "resume", "objective")
_NUMBER = (int, float)  # the exact types of a JSON number (rows come from json.loads; bool is not a number)
_NOT_NUMBERS = frozenset({str, list, dict, bool, type(None)})  # exact types: never a number (subclasses are checked)
SCORES_ARTIFACT = "case_scores.json"  # a job's compact per-case scores (beside cases.jsonl)
SCORES_FORMAT = "ragbench-case-scores/1"
# what the failure taxonomy (compare/taxonomy.py) reads of a case record: its qrels and ranked ids
RANKED_FIELDS = ("ranked_ids", "ranked_chunk_ids")  # a deeper ranked list, when the case record has one
QRELS_FIELDS = ("qrels", "chunk_qrels")
TAXONOMY_FIELDS = (*QRELS_FIELDS, *RANKED_FIELDS, "retrieved_ids")


def config_label(run_name: str) -> str:
    """What a job ran, from its run name (``topk=5 dataset=locomo #3``, or ``#3 dataset=locomo,retrieval.topk=5``
    from older sweeps): its overrides in sorted order, without the job number and without the ones that only
    say where results go (``cache.dir=...``)."""
    _, items = parse_run_name(run_name)
    return ",".join(sorted(o for o in items if not o.lstrip("+~").startswith(_WHERE_KEYS)))


@dataclass(frozen=True)
class RunCases:
    """A run's per-case data; ``fields`` holds every numeric per-case field (NaN where a case lacks it)."""

    run_id: str
    name: str
    dataset: str
    dataset_sha256: str
    topk: int | None
    qids: tuple[str, ...]
    types: tuple[str, ...]
    ok: np.ndarray
    fields: Mapping[str, np.ndarray]
    rows: tuple[Mapping[str, Any], ...] = ()  # the raw records (ranked ids, qrels, ...), for the taxonomy
    source: str = "mlflow"
    metrics: Mapping[str, float] = field(default_factory=dict)  # the run's logged metrics, when known
    skipped: np.ndarray | None = None  # cases not run (budget reached): NaN for every metric, never 0
    baseline: str = ""  # a baseline job's kind (oracle, closed_book: runs_table.baseline_kind), "" for a configuration
    params: Mapping[str, str] = field(default_factory=dict)  # its config as dotted keys (select.record_params)
    tags: tuple[tuple[str, ...], ...] = ()  # each case's tags (the custom format's `tags`; by_tag/*), when known

    @property
    def config(self) -> str:
        return config_label(self.name)

    def values(self, spec: MetricSpec) -> np.ndarray:
        """Per-case values of ``spec`` (NaN = the case does not count for it), under the job's rules:
        an end-to-end score counts a failed or unscored case as 0 (``aggregate.is_score``); latency
        counts successful cases only."""
        x = self.fields.get(spec.key)
        # no case holds it while some case ran: never measured (an LLM judge none of whose verdicts parsed),
        # left out as the job leaves it out (ragbench.judge.aggregate.summarize), never compared as zeros
        never = x is None and bool(self.ok.any())
        x = np.full(len(self.qids), np.nan) if x is None else x.copy()
        if spec.zero_when_failed and not never:
            x = np.nan_to_num(x, nan=0.0)
            if self.skipped is not None:
                x[self.skipped] = np.nan
        if spec.successful_only:
            x[~self.ok] = np.nan
        return x


def repeat_values(run: RunCases, spec: MetricSpec) -> tuple[list[np.ndarray], str] | None:
    """``repeats=N``: each case's values of ``spec`` over its repeats (a case without repeats, or that did not
    run them all: its one value, as ``values`` gives it) and the run's reducer; None when no case of the run
    has repeats of it (its records are not at hand, or it ran with repeats=1)."""
    x = run.values(spec)
    if len(run.rows) != len(x):
        return None
    out: list[np.ndarray] = []
    found, reducer = False, "mean"
    for i, row in enumerate(run.rows):
        got = record_runs(row) if isinstance(row, Mapping) and run.ok[i] else None
        vals = [float(r["scores"][spec.key]) for r in got[1] if isinstance(r.get("scores"), Mapping)
                and _number(r["scores"].get(spec.key)) is not None] if got is not None else []
        if got is not None and vals and len(vals) == len(got[1]):
            found, reducer = True, got[0]
            out.append(np.asarray(vals, dtype=float))
        else:
            out.append(np.asarray([x[i]], dtype=float))
    return (out, reducer) if found else None


def _number(value: Any) -> float | None:
    """A per-case field's value when it is a finite JSON number (bool is not one), else None. The same
    answer for a record before ``json.dumps`` as for the parsed line: json writes an int or float subclass
    as a number and anything else through ``default=str`` as text."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        x = float(value)
        return x if math.isfinite(x) else None
    return None


def case_columns(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The columns a comparison reads from case records: ``qid``, ``question_type`` and ``status`` per case,
    and ``fields``: every field some case holds a finite number in, one value per case (None where the case
    has none). One pass over the rows: a case row holds ~60 values, most of them lists and text."""
    found: dict[str, tuple[list[int], list[float]]] = {}
    skip = _NOT_NUMBERS
    for i, row in enumerate(rows):
        for key, value in row.items():
            kind = type(value)
            if kind in skip:  # most values of a record: text, lists, objects (the exact types json.loads makes)
                continue
            if kind is float and value - value == 0.0:  # finite (inf - inf and NaN - NaN are NaN)
                at, vals = found.setdefault(key, ([], []))
                at.append(i)
                vals.append(value)
                continue
            x = _number(value)
            if x is not None:
                at, vals = found.setdefault(key, ([], []))
                at.append(i)
                vals.append(x)
            elif isinstance(value, int | float) and not isinstance(value, bool):
                found.setdefault(key, ([], []))  # NaN or infinite: a field, without a value for this case
    fields: dict[str, list[float | None]] = {}
    for key in sorted(found):
        col: list[float | None] = [None] * len(rows)
        for i, x in zip(*found[key], strict=True):
            col[i] = x
        fields[key] = col
    tags = [case_tags(row) for row in rows]
    return {"qid": [row.get("qid") for row in rows], "question_type": [row.get("question_type") for row in rows],
            "status": [row.get("status", "ok") for row in rows], "fields": fields,
            **({"tags": tags} if any(tags) else {})}  # only when some case has tags: others' documents unchanged


def case_tags(row: Mapping[str, Any]) -> list[str]:
    """A case record's tags as by_tag/* names them (``query_meta.tags``, the custom format's ``tags``)."""
    meta = row.get("query_meta")
    tags = meta.get("tags") if isinstance(meta, dict) else None
    return list(dict.fromkeys(metric_name(str(t)) for t in tags)) if isinstance(tags, list) else []


def from_rows(rows: Sequence[Mapping[str, Any]], *, run_id: str, name: str, dataset: str, dataset_sha256: str = "",
              topk: int | None = None, source: str = "mlflow", keep_rows: bool = True,
              metrics: Mapping[str, float] | None = None, baseline: str = "",
              params: Mapping[str, str] | None = None) -> RunCases:
    """RunCases from ``cases.jsonl`` records (``ragbench.record.CaseRecord.row``)."""
    return from_columns(case_columns(rows), run_id=run_id, name=name, dataset=dataset,
                        dataset_sha256=dataset_sha256, topk=topk, source=source, metrics=metrics,
                        rows=rows if keep_rows else (), baseline=baseline, params=params)


def from_columns(columns: Mapping[str, Any], *, run_id: str, name: str, dataset: str, dataset_sha256: str = "",
                 topk: int | None = None, source: str = "mlflow", metrics: Mapping[str, float] | None = None,
                 rows: Sequence[Mapping[str, Any]] = (), baseline: str = "",
                 params: Mapping[str, str] | None = None) -> RunCases:
    """RunCases from ``case_columns`` (the records' columns, or a ``case_scores.json`` document)."""
    qids: list[str] = []
    seen: set[str] = set()
    for i, qid in enumerate(columns["qid"]):
        if not isinstance(qid, str) or not qid:
            raise ConfigError(f"run {run_id} ({source}): case {i + 1} has no 'qid'; "
                              "cases.jsonl must come from a ragbench job")
        if qid in seen:
            raise ConfigError(f"run {run_id} ({source}): case id {qid!r} appears twice; cases cannot be paired")
        seen.add(qid)
        qids.append(qid)
    fields = {key: np.array([np.nan if x is None else x for x in col], dtype=float)
              for key, col in columns["fields"].items()}
    keys = list(fields)
    latency = [k for k in keys if k.startswith("latency/") and k.endswith("_ms") and k != "latency/total_ms"]
    if latency and "latency/total_ms" not in fields:  # the whole case: the sum of its timed stages
        stacked = np.vstack([fields[k] for k in latency])
        total = np.nansum(stacked, axis=0)
        total[np.all(np.isnan(stacked), axis=0)] = np.nan
        fields["latency/total_ms"] = total
    status = list(columns["status"])
    tags = columns.get("tags")  # a case_scores.json written before tags has none
    ok_tags = isinstance(tags, list) and len(tags) == len(qids) and all(
        isinstance(t, list) and all(isinstance(x, str) for x in t) for t in tags)
    return RunCases(
        run_id=run_id, name=name, dataset=dataset, dataset_sha256=dataset_sha256, topk=topk, qids=tuple(qids),
        types=tuple(metric_name(str(t or "unknown")) for t in columns["question_type"]),
        ok=np.array([s == "ok" for s in status], dtype=bool), fields=fields,
        rows=tuple(rows), source=source, metrics=dict(metrics or {}),
        skipped=np.array([s == "skipped" for s in status], dtype=bool), baseline=baseline,
        params=dict(params or {}), tags=tuple(tuple(t) for t in tags) if ok_tags and tags else (),
    )


def scores_document(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``case_scores.json``: what a comparison reads of a job's cases, a few percent of ``cases.jsonl``'s
    size -- the ``case_columns`` of its records, plus each case's qrels and ranked ids (the taxonomy)."""
    return {"format": SCORES_FORMAT, **case_columns(rows),
            "taxonomy": [{k: row[k] for k in TAXONOMY_FIELDS if k in row} for row in rows]}


def from_scores_document(doc: Any, *, run_id: str, source: str, **meta: Any) -> RunCases:
    """RunCases from a ``case_scores.json`` document (``scores_document``)."""
    n = len(doc.get("qid") or []) if isinstance(doc, dict) else -1
    ok = (n >= 0 and doc.get("format") == SCORES_FORMAT and isinstance(doc.get("fields"), dict)
          and all(isinstance(doc.get(k), list) and len(doc[k]) == n for k in ("question_type", "status", "taxonomy"))
          and all(isinstance(c, list) and len(c) == n and all(x is None or type(x) in _NUMBER for x in c)
                  for c in doc["fields"].values()))
    if not ok:
        raise ConfigError(f"run {run_id} ({source}): {SCORES_ARTIFACT} is not a {SCORES_FORMAT} document with one "
                          "value per case in every column; its cases.jsonl holds the same numbers")
    return from_columns(doc, run_id=run_id, source=source, rows=doc["taxonomy"], **meta)


def save_baseline(path: Path, runs: Sequence[RunCases]) -> None:
    """A committable JSON of these runs' per-case scores (no MLflow server needed to compare against it):
    one case per line, so a diff shows which cases changed."""
    blocks = []
    for r in runs:
        meta = {"run_id": r.run_id, "name": r.name, "config": r.config, "dataset": r.dataset,
                "dataset_sha256": r.dataset_sha256, "topk": r.topk}
        lines = []
        for i, qid in enumerate(r.qids):
            case: dict[str, Any] = {"qid": qid, "question_type": r.types[i], "status": "ok" if r.ok[i] else "failed"}
            case.update({k: float(v[i]) for k, v in sorted(r.fields.items())
                         if k != "latency/total_ms" and not k.startswith(_CHUNK_LEVEL) and not np.isnan(v[i])})
            lines.append("   " + json.dumps(case, sort_keys=True, ensure_ascii=False))
        head = json.dumps(meta, sort_keys=True, ensure_ascii=False)[:-1]
        blocks.append(f" {head}, \"cases\": [\n" + ",\n".join(lines) + "\n ]}")
    text = f'{{"format": "{BASELINE_FORMAT}", "runs": [\n' + ",\n".join(blocks) + "\n]}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def load_baseline(path: Path) -> list[RunCases]:
    """The runs of a file written by ``save_baseline``."""
    try:
        data = loads_bounded(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"--baseline-file {path}: no such file; write one with --save-baseline {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:  # NestedTooDeep is a JSONDecodeError
        raise ConfigError(f"--baseline-file {path}: not readable JSON ({exc}); "
                          "write it again with --save-baseline") from None
    if not isinstance(data, dict) or data.get("format") != BASELINE_FORMAT or not isinstance(data.get("runs"), list):
        raise ConfigError(f"--baseline-file {path}: not a ragbench baseline (expected \"format\": "
                          f"\"{BASELINE_FORMAT}\"); write one with --save-baseline")
    out = []
    for i, run in enumerate(data["runs"]):
        if not isinstance(run, dict) or not isinstance(run.get("cases"), list) or "dataset" not in run:
            raise ConfigError(f"--baseline-file {path}: run {i + 1} lacks 'dataset' or 'cases'; "
                              "write the file again with --save-baseline")
        out.append(from_rows(run["cases"], run_id=str(run.get("run_id", f"file#{i}")),
                             name=str(run.get("name", "")), dataset=str(run["dataset"]),
                             dataset_sha256=str(run.get("dataset_sha256", "")), topk=run.get("topk"),
                             source=str(path)))
    if not out:
        raise ConfigError(f"--baseline-file {path}: holds no runs; write it again with --save-baseline")
    return out
