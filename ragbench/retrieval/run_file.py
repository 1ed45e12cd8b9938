"""``retrieval=run_file``: scores a ranking another system produced (a TREC run file) as a native retriever's.

A run file has one line per retrieved id, ``qid Q0 id rank score tag`` (whitespace-separated, as trec_eval
reads it). Each question's hits are its lines in ``rank`` order (the score column is kept as the hit's
score). An id is a searchable chunk id of the job's tree, or a document id when the document has exactly one
searchable unit (``chunker=document``), so a document run from Pyserini, Elasticsearch or a vendor API
scores as is. Everything after retrieval (metrics, expansion, generation, judging, compare) is unchanged.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ragbench.errors import ConfigError, RagbenchError
from ragbench.ingest.document import document_of
from ragbench.types import Hit, Query

COLUMNS = "qid Q0 id rank score tag"
# above this share of the dataset's questions without a ranking, a warning; at all of them, an error
WARN_UNRANKED = 0.1

log = logging.getLogger(__name__)


class RunFileError(RagbenchError):
    """A run file that cannot be scored: the message names the file, the line and the fix."""


@runtime_checkable
class QueryBoundRetriever(Protocol):
    """A retriever whose results are keyed by question id: the pipeline tells it the questions first."""

    def bind(self, queries: Sequence[Query]) -> None: ...


def read_run(path: Path) -> dict[str, list[tuple[str, float]]]:
    """qid -> [(id, score)] in rank order; a wrong column count, a bad rank or score, a repeated rank or a
    repeated id within one question is a RunFileError naming the line."""
    if not path.is_file():
        raise RunFileError(f"run file {path} does not exist; fix: set retrieval.path to a TREC run file ({COLUMNS})")
    ranked: dict[str, dict[int, tuple[str, float]]] = defaultdict(dict)
    seen: dict[str, set[str]] = defaultdict(set)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_no = data.count(b"\n", 0, exc.start) + 1
        raise RunFileError(f"run file {path} is not UTF-8 (byte 0x{data[exc.start]:02x} at offset "
                           f"{exc.start}, line {line_no}); fix: write it as UTF-8 (iconv -t utf-8)") from None
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cols = line.split()
        if len(cols) != 6:
            raise RunFileError(f"run file {path}, line {n}: {len(cols)} columns, expected 6 ({COLUMNS}); "
                               "fix: write TREC run lines")
        qid, _, rid, rank_text, score_text, _ = cols
        try:
            rank, score = int(rank_text), float(score_text)
        except ValueError:
            raise RunFileError(f"run file {path}, line {n}: rank {rank_text!r} must be an integer and score "
                               f"{score_text!r} a number; fix: write TREC run lines ({COLUMNS})") from None
        if rank in ranked[qid]:
            raise RunFileError(f"run file {path}, line {n}: duplicate rank {rank} for question {qid!r} "
                               f"(also {ranked[qid][rank][0]!r}); fix: give each id of a question its own rank")
        if rid in seen[qid]:
            raise RunFileError(f"run file {path}, line {n}: id {rid!r} is ranked twice for question {qid!r}; "
                               "fix: keep each id once per question (its best rank)")
        ranked[qid][rank] = (rid, score)
        seen[qid].add(rid)
    return {qid: [ranks[r] for r in sorted(ranks)] for qid, ranks in ranked.items()}


def check_coverage(run: Mapping[str, Sequence[tuple[str, float]]], queries: Sequence[Query],
                   path: Path | None) -> int:
    """How many of the dataset's questions the run ranks nothing for (each scores 0). An empty run, or one
    that ranks none of the questions (ids from another dataset or numbering), is a RunFileError; more
    than ``WARN_UNRANKED`` of them unranked is a warning with the count and the fix."""
    if not run:
        raise RunFileError(f"run file {path} holds no run line; fix: write one line per retrieved id "
                           f"({COLUMNS})")
    qids = list(dict.fromkeys(q.qid for q in queries))
    unranked = [qid for qid in qids if qid not in run]
    if len(unranked) <= len(qids) * WARN_UNRANKED:
        return len(unranked)
    known = set(qids)
    foreign = sorted(qid for qid in run if qid not in known)
    seen = f"; its ids look like {foreign[0]!r}, the dataset's like {qids[0]!r}" if foreign else ""
    fix = "fix: put the dataset's question ids in the first column (as python -m ragbench.export --trec does)"
    if len(unranked) == len(qids):
        raise RunFileError(f"run file {path} ranks none of the dataset's {len(qids)} questions{seen}; {fix}")
    log.warning("run file %s ranks nothing for %d of %d questions (first: %r); they score 0%s\n  %s",
                path, len(unranked), len(qids), unranked[0], seen, fix)
    return len(unranked)


class RunFileRetriever:
    """Hits read from a TREC run file (``retrieval.path``); needs no index, no embeddings."""

    needs_vectors = False

    def __init__(self, *, path: str | None = None) -> None:
        self.path = Path(path).expanduser() if path else None
        self._run: dict[str, list[tuple[str, float]]] | None = None
        self._by_text: dict[str, str] = {}
        self._unit_of: dict[str, str] = {}

    def _file(self) -> Path:
        if self.path is None:
            raise ConfigError("retrieval=run_file needs retrieval.path=RUN_FILE (a TREC run: " + COLUMNS + ")")
        return self.path

    def _read(self) -> dict[str, list[tuple[str, float]]]:
        if self._run is None:
            self._run = read_run(self._file())
        return self._run

    def params(self) -> Mapping[str, Any]:
        """The run file's content hash: a changed file is a new ranking (index and retrieval cache keys)."""
        if self.path is None or not self.path.is_file():
            return {"run_file": None}  # nothing to key: bind/build raise the named error
        return {"run_file": hashlib.sha256(self.path.read_bytes()).hexdigest()}

    def prepare(self, queries: Sequence[Query], tree: Any) -> None:
        """``ragbench.protocols.QueryBound``: its rankings are keyed by question id (``bind``)."""
        self.bind(queries)

    def bind(self, queries: Sequence[Query]) -> None:
        """Which question each searched text is; two questions of one text must have one ranking."""
        run = self._read()
        check_coverage(run, queries, self.path)
        self._by_text = {}
        for q in queries:
            other = self._by_text.setdefault(q.text, q.qid)
            if other != q.qid and run.get(other) != run.get(q.qid):
                raise RunFileError(f"run file {self.path}: questions {other!r} and {q.qid!r} have the same text "
                                   "but different rankings; fix: give the questions distinct texts")

    def build(self, *, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray | None = None) -> None:
        """Maps every id of the run onto the searchable chunks; an id that names neither a chunk nor a
        document with one unit is a RunFileError naming it."""
        units: dict[str, list[str]] = defaultdict(list)
        for cid in ids:
            units[document_of(cid)].append(cid)
        known = set(ids)
        unit_of = {cid: cid for cid in ids}
        unit_of.update({doc: found[0] for doc, found in units.items() if len(found) == 1 and doc not in known})
        unknown = sorted({rid for hits in self._read().values() for rid, _ in hits if rid not in unit_of})
        if unknown:
            raise RunFileError(
                f"run file {self.path}: {len(unknown)} ids name no searchable chunk or single-unit document of the "
                f"corpus (first: {unknown[0]!r}); fix: run the same corpus, and with document ids use chunker=document")
        self._unit_of = unit_of

    def search(self, *, texts: Sequence[str], vectors: np.ndarray | None = None, k: int) -> list[list[Hit]]:
        """The run's first ``k`` hits of each text's question (none when the run lists none for it)."""
        run = self._read()
        out: list[list[Hit]] = []
        for text in texts:
            if text not in self._by_text:
                raise RunFileError(f"run file {self.path}: a searched text is not a question of the dataset "
                                   f"({text[:60]!r}); fix: retrieval=run_file needs query=none")
            hits = run.get(self._by_text[text], [])[:k]
            out.append([Hit(chunk_id=self._unit_of[rid], score=score, rank=r)
                        for r, (rid, score) in enumerate(hits, start=1)])
        return out
