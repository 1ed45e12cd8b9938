"""``python -m ragbench.export RUN_ID --trec run.txt --qrels qrels.txt``: a run's ranking and qrels in TREC
format, read from its ``cases.jsonl``, so any figure can be checked with ``trec_eval`` or ``ranx`` and the
ranking scored again with ``retrieval=run_file``.

``--level doc`` (the default when the dataset judges relevance per document): each question's documents
in the order of their first hit, without the ids BEIR's identical-id rule ignores, and the document qrels
(``retrieval/doc/*`` equal trec_eval's figures on them). ``--level chunk``: the ranked chunk ids as
retrieved and the chunk qrels (``retrieval/chunk/*``); ``retrieval=run_file`` of this file reproduces
every retrieval metric of the run. The score column is ``depth - rank + 1`` (strictly decreasing), so
trec_eval, which orders by score, reads the ranking ragbench scored, ties included.
``--responses out.jsonl``: each answered case as a ``system=responses`` record (its answer, and its ranked
chunk ids, to the deepest metric cut-off, as contexts, and in ``metadata`` the run's id and top-k); read
back with the run's chunker and expander (``system=responses system.path=out.jsonl expander=parent``) it
reproduces the run's metrics, at the run's top-k (``ragbench.exported``: no ``retrieval.topk`` to pass).
Any question id works there; TREC files, whose columns are separated by whitespace, refuse an id with one.
``--mlflow-dataset NAME``: the run's questions (gold answers, gold evidence, types, ids) as a new MLflow GenAI
evaluation dataset in the same store, linked to the run's experiment (``ragbench.datasets.mlflow_dataset``);
``dataset=mlflow dataset.name=NAME dataset.documents=...`` reads it back.
Exit 0 on success, 1 when the run's case record is damaged (nothing is written), 2 on a usage error
(unknown run, no store, no case record, an output path that cannot be written).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragbench.datasets.mlflow_dataset import case_records, write_dataset
from ragbench.exported import export_metadata
from ragbench.judge.document import document_ranking
from ragbench.verify import DAMAGED_FIX, DamagedRecord, UsageError, default_tracking_uri, load_run

LEVELS = ("doc", "chunk")
TAG = "ragbench"


def ranking(row: Mapping[str, Any], level: str) -> list[str]:
    """The ids one case ranked at ``level``."""
    if level == "doc":
        return document_ranking(row["ranked_doc_ids"], row.get("doc_ignore") or ())
    return list(row["ranked_ids"])


def qrels(row: Mapping[str, Any], level: str) -> Mapping[str, int]:
    """The graded relevance one case was scored against at ``level``."""
    return row.get("doc_qrels") or {} if level == "doc" else row["qrels"]["chunk"]


def run_lines(rows: Iterable[Mapping[str, Any]], level: str) -> list[str]:
    """TREC run lines (``qid Q0 id rank score tag``) of every case."""
    out: list[str] = []
    for row in rows:
        ids = ranking(row, level)
        out.extend(f"{row['qid']} Q0 {rid} {r} {len(ids) - r + 1} {TAG}" for r, rid in enumerate(ids, start=1))
    return out


def qrels_lines(rows: Iterable[Mapping[str, Any]], level: str) -> list[str]:
    """TREC qrels lines (``qid 0 id grade``) of every case whose evidence matched (the cases scored)."""
    return [f"{row['qid']} 0 {rid} {grade}" for row in rows if row["evidence"]["matched"]
            for rid, grade in qrels(row, level).items()]


def default_level(rows: Sequence[Mapping[str, Any]]) -> str:
    """``doc`` when the run has document qrels (a dataset judged per document), else ``chunk``."""
    return "doc" if any("doc_qrels" in r for r in rows) else "chunk"


def responses_lines(rows: Iterable[Mapping[str, Any]], run_id: str = "",
                    topk: int | None = None) -> list[str]:
    """One ``ragbench.systems.records`` JSON line per answered case (failed cases have no record: read back,
    each is a missing question, failed as it was). Each record's ``metadata`` names the run and its top-k
    (``ragbench.exported``): ``system=responses`` reads the file back at that top-k."""
    import json

    meta = export_metadata(run_id, topk)
    out: list[str] = []
    for row in rows:
        if row.get("status") != "ok" or row.get("answer") is None:
            continue
        texts = list(row.get("topk_texts") or [])
        contexts = [{"id": rid, **({"text": texts[i]} if i < len(texts) else {})}
                    for i, rid in enumerate(row["ranked_ids"])]
        record: dict[str, Any] = {"qid": row["qid"], "answer": row["answer"], "contexts": contexts,
                                  "usage": {"prompt_tokens": int(row.get("prompt_tokens") or 0),
                                            "completion_tokens": int(row.get("completion_tokens") or 0)}}
        if row.get("citations"):
            record["citations"] = list(row["citations"])
        if isinstance(row.get("latency/generate_ms"), int | float):
            record["latency_ms"] = float(row["latency/generate_ms"])
        record["metadata"] = meta
        out.append(json.dumps(record, ensure_ascii=False))
    return out


def _for_ids(lines: list[str]) -> None:
    bad = next((line for line in lines if len(line.split()) != (6 if " Q0 " in line else 4)), None)
    if bad is not None:
        raise UsageError(f"an id holds whitespace ({bad!r}), and TREC files separate columns by whitespace; "
                         "fix: export --responses OUT.jsonl instead (JSON keeps any id)")


def _write(path: str, lines: Sequence[str]) -> None:
    """``lines`` into ``path``; a UsageError naming the path when it cannot be written."""
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"cannot write {path}: it is a folder; fix: give a file path")
    try:
        target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path} ({exc.strerror or type(exc).__name__}); fix: give a "
                         "writable file path whose folder exists") from None


def _rows(run_id: str, uri: str) -> tuple[list[dict[str, Any]], int | None]:
    """The run's case rows and its top-k; UsageError / DamagedRecord as ``ragbench.verify`` reads them."""
    rows, _, topk, *_ = load_run(run_id, uri)
    if "record_version" not in rows[0]:
        raise UsageError(f"run {run_id} has no case record (a run logged before ragbench.verify)")
    return rows, topk or rows[0].get("topk")


def _to_mlflow(name: str, records: Sequence[Mapping[str, Any]], run_id: str, uri: str) -> str:
    """``records`` as the new evaluation dataset ``name`` of the run's experiment; what was written, in a line."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        experiment_id = MlflowClient(tracking_uri=uri).get_run(run_id).info.experiment_id
        dataset_id, digest = write_dataset(name, records, uri=uri, experiment_id=experiment_id)
    except ValueError as exc:
        raise UsageError(f"{exc}; fix: choose another --mlflow-dataset name") from None
    except (MlflowException, NotImplementedError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise UsageError(f"the MLflow store {uri} did not take the dataset ({first}); fix: use a store that "
                         "keeps evaluation datasets (sqlite, postgresql, a server of MLflow >= 3.4)") from None
    return (f"{len(records)} questions as MLflow dataset {name!r}\n  id {dataset_id}, digest {digest}\n"
            f"  read back: dataset=mlflow dataset.name={name}\n    dataset.documents=<the corpus>")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragbench.export", description=__doc__.splitlines()[0])
    parser.add_argument("run_id", help="MLflow run id of a ragbench job")
    parser.add_argument("--trec", help="where to write the TREC run file")
    parser.add_argument("--responses", help="where to write the answers and rankings as system=responses records")
    parser.add_argument("--qrels", help="where to write the TREC qrels file")
    parser.add_argument("--mlflow-dataset", metavar="NAME",
                        help="write the questions as a new MLflow evaluation dataset NAME (same store)")
    parser.add_argument("--level", choices=LEVELS, help="doc (default for datasets judged per document) or chunk")
    parser.add_argument("--tracking-uri", default=None, help=f"MLflow store (default: {default_tracking_uri()})")
    args = parser.parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # the output is the lines below
    if not args.trec and not args.responses and not args.qrels and not args.mlflow_dataset:
        parser.error("give --trec, --qrels, --responses and/or --mlflow-dataset")
    written: list[str] = []
    try:
        rows, topk = _rows(args.run_id, args.tracking_uri or default_tracking_uri())
        level = args.level or default_level(rows)
        if (args.trec or args.qrels) and level == "doc" and default_level(rows) != "doc":
            raise UsageError(f"run {args.run_id} has no document qrels (its dataset is not judged per document); "
                             "fix: use --level chunk")
        try:  # every file's lines first: a damaged row writes no file
            files: dict[str, tuple[str, list[str]]] = {}
            if args.responses:
                files["responses"] = (args.responses, responses_lines(rows, args.run_id, topk))
            if args.trec:
                files["trec"] = (args.trec, run_lines(rows, level))
                _for_ids(files["trec"][1])
            if args.qrels:
                files["qrels"] = (args.qrels, qrels_lines(rows, level))
                _for_ids(files["qrels"][1])
            records = case_records(rows) if args.mlflow_dataset else []
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
            raise DamagedRecord(f"run {args.run_id}: a case record lacks or mistypes a field the export "
                                f"reads ({type(exc).__name__}: {exc}); {DAMAGED_FIX}") from None
        if args.mlflow_dataset:
            written.append(_to_mlflow(args.mlflow_dataset, records, args.run_id,
                                      args.tracking_uri or default_tracking_uri()))
        for what, (path, lines) in files.items():
            _write(path, lines)
            if what == "responses":
                written.append(f"{len(lines)} records of {len(rows)} questions in {path}\n  read back: "
                               f"system=responses system.path={path} expander=parent\n  (its top-k, {topk}, "
                               "is read from the file; give the run's dataset and chunker)")
            elif what == "trec":
                written.append(f"{len(lines)} ranked ids of {len(rows)} questions ({level} level) in {path}")
            else:
                written.append(f"{len(lines)} judgements in {path}")
    except UsageError as exc:
        print(f"ragbench.export: {exc}", file=sys.stderr)
        return 2
    except DamagedRecord as exc:
        print(f"ragbench.export: FAILED: {exc}", file=sys.stderr)
        return 1
    for line in written:
        print(f"ragbench.export: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
