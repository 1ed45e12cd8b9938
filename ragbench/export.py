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
chunk ids, to the deepest metric cut-off, as contexts); read back with the run's chunker and expander
(``system=responses system.path=out.jsonl expander=parent``) it reproduces the run's metrics.
Exit 0 on success, 2 on a usage error (unknown run, no store, no case record).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragbench.judge.document import document_ranking

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


def responses_lines(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """One ``ragbench.systems.records`` JSON line per answered case (failed cases have no record: read back,
    each is a missing question, failed as it was)."""
    import json

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
        out.append(json.dumps(record, ensure_ascii=False))
    return out


def _for_ids(lines: list[str]) -> None:
    bad = next((line for line in lines if len(line.split()) != (6 if " Q0 " in line else 4)), None)
    if bad is not None:
        raise ValueError(f"an id holds whitespace: {bad!r}; TREC files separate columns by whitespace")


def main(argv: Sequence[str] | None = None) -> int:
    from ragbench.verify import UsageError, default_tracking_uri, load_run

    parser = argparse.ArgumentParser(prog="python -m ragbench.export", description=__doc__.splitlines()[0])
    parser.add_argument("run_id", help="MLflow run id of a ragbench job")
    parser.add_argument("--trec", help="where to write the TREC run file")
    parser.add_argument("--responses", help="where to write the answers and rankings as system=responses records")
    parser.add_argument("--qrels", help="where to write the TREC qrels file")
    parser.add_argument("--level", choices=LEVELS, help="doc (default for datasets judged per document) or chunk")
    parser.add_argument("--tracking-uri", default=None, help=f"MLflow store (default: {default_tracking_uri()})")
    args = parser.parse_args(argv)
    if not args.trec and not args.responses:
        parser.error("give --trec RUN_FILE and/or --responses OUT.jsonl")
    try:
        rows, *_ = load_run(args.run_id, args.tracking_uri or default_tracking_uri())
        if "record_version" not in rows[0]:
            raise UsageError(f"run {args.run_id} has no case record (a run logged before ragbench.verify)")
        level = args.level or default_level(rows)
        if level == "doc" and default_level(rows) != "doc":
            raise UsageError(f"run {args.run_id} has no document qrels (its dataset is not judged per document); "
                             "fix: use --level chunk")
        lines = run_lines(rows, level)
        _for_ids(lines)
    except (UsageError, ValueError) as exc:
        print(f"ragbench.export: {exc}", file=sys.stderr)
        return 2
    written: list[str] = []
    if args.responses:
        records = responses_lines(rows)
        Path(args.responses).write_text("".join(r + "\n" for r in records), encoding="utf-8")
        written.append(f"{len(records)} records of {len(rows)} questions in {args.responses}")
    if not args.trec:
        print("ragbench.export: " + "; ".join(written))
        return 0
    Path(args.trec).write_text("\n".join(lines) + "\n", encoding="utf-8")
    written.append(f"{len(lines)} ranked ids of {len(rows)} questions ({level} level) in {args.trec}")
    if args.qrels:
        judged = qrels_lines(rows, level)
        Path(args.qrels).write_text("\n".join(judged) + "\n", encoding="utf-8")
        written.append(f"{len(judged)} judgements in {args.qrels}")
    print("ragbench.export: " + "; ".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
