"""``system=responses``: recorded outputs of an outside RAG system, one JSON record per line (``records``).

Each line is read in binary, at most ``max_record_chars`` bytes, so a runaway line (100 MB of one answer)
is one named error, not a memory spike. A line that is not UTF-8, not JSON or not a record is one
RecordError naming the file, the line and the fix (JSON nested deeper than ``ragbench.jsonio``'s bound
too: "nested too deep"). Secrets in a record are masked as it is read (``masked``). Whole-file outcomes
are counted, never dropped: a question of the dataset with no record fails its case
(``MissingResponseError``, scored 0 end to end); a qid the dataset does not have is counted and logged
once; a qid given twice fails its case (``DuplicateResponseError``: which record is meant cannot be known).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragbench.errors import ConfigError, LLMError
from ragbench.jsonio import NestedTooDeep, loads_bounded
from ragbench.redact import redact, redact_obj
from ragbench.systems.records import RecordError, SystemRecord, parse_record
from ragbench.types import Query

log = logging.getLogger(__name__)
MAX_RECORD_CHARS = 16_000_000


class MissingResponseError(LLMError):
    """The responses file has no record for this question: the case fails (scored 0)."""


class DuplicateResponseError(LLMError):
    """The responses file has several records for this question: the case fails (which one is meant?)."""


@dataclass(frozen=True)
class ResponsesFile:
    """Every record of a responses file by qid (the first of a duplicated qid), and each qid's count."""

    path: Path
    records: dict[str, SystemRecord]
    counts: Counter[str]
    sha256: str


def read_responses(path: Path, *, max_record_chars: int = MAX_RECORD_CHARS) -> ResponsesFile:
    """The records of ``path``; a malformed line is one RecordError naming the line."""
    if not path.is_file():
        raise ConfigError(f"responses file {path} does not exist; fix: set system.path to a JSON Lines file of "
                          "records (python -m ragbench.export RUN_ID --responses out.jsonl writes one)")
    records: dict[str, SystemRecord] = {}
    counts: Counter[str] = Counter()
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        n = 0
        while True:
            raw = fh.readline(max_record_chars + 1)
            if not raw:
                break
            n += 1
            where = f"responses file {path}, line {n}"
            if len(raw) > max_record_chars and not raw.endswith(b"\n"):
                raise RecordError(f"{where}: longer than system.max_record_chars={max_record_chars:,} bytes; fix: "
                                  "shorten the record (contexts are passages, not documents) or raise the limit")
            digest.update(raw)
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise RecordError(f"{where}: not UTF-8 (byte {exc.start}); fix: write the file as UTF-8") from None
            try:
                obj = loads_bounded(text, where=where)
            except NestedTooDeep as exc:
                raise RecordError(str(exc)) from None
            except json.JSONDecodeError as exc:
                raise RecordError(f"{where}: not JSON ({exc.msg} at column {exc.colno}); fix: one JSON object per "
                                  "line") from None
            record = parse_record(masked(obj), where)
            counts[record.qid] += 1
            records.setdefault(record.qid, record)
    return ResponsesFile(path=path, records=records, counts=counts, sha256=digest.hexdigest())


def masked(obj: Any) -> Any:
    """A record with its secrets masked before anything reads it (``ragbench.redact``: registered keys and
    secret-named assignments in the answer and the contexts' texts, secret-named keys in ``metadata``), so
    the answer scored, cached (``cache/answers``) and logged is one text. qid and ids are kept: they match."""
    if not isinstance(obj, dict):
        return obj
    out = dict(obj)
    if isinstance(out.get("answer"), str):
        out["answer"] = redact(out["answer"])
    if isinstance(out.get("contexts"), list):
        out["contexts"] = [_masked_context(c) for c in out["contexts"]]
    if isinstance(out.get("metadata"), dict):
        out["metadata"] = redact_obj(out["metadata"])
    return out


def _masked_context(ctx: Any) -> Any:
    if isinstance(ctx, str):
        return redact(ctx)
    if isinstance(ctx, dict) and isinstance(ctx.get("text"), str):
        return {**ctx, "text": redact(ctx["text"])}
    return ctx


class ResponsesSource:
    """The recorded outputs, looked up per question (no call is made)."""

    kind = "responses"

    def __init__(self, *, path: str | None = None, max_record_chars: int = MAX_RECORD_CHARS) -> None:
        if not path:
            raise ConfigError("system=responses needs system.path=RESPONSES.jsonl (one record per question: "
                              "qid, answer, contexts)")
        self.path = Path(path).expanduser()
        self.max_record_chars = max_record_chars
        self._file: ResponsesFile | None = None

    def file(self) -> ResponsesFile:
        if self._file is None:
            self._file = read_responses(self.path, max_record_chars=self.max_record_chars)
        return self._file

    @property
    def identity(self) -> str:
        return f"responses:{self.file().sha256[:16]}"

    def unknown(self, queries: Sequence[Query]) -> list[str]:
        """qids of the file that name no question of the dataset (counted, logged once)."""
        known = {q.qid for q in queries}
        extra = sorted(q for q in self.file().records if q not in known)
        if extra:
            log.warning("responses file %s: %d records name no question of the dataset (first: %r); they are "
                        "not scored (system/unknown_qids)", self.path, len(extra), extra[0])
        return extra

    def record(self, query: Query) -> SystemRecord:
        """The question's record; MissingResponseError or DuplicateResponseError fail its case."""
        f = self.file()
        found = f.counts.get(query.qid, 0)
        if found == 0 and query.conversation is not None:
            raise MissingResponseError(f"responses file {self.path} has no record for turn {query.turn} of "
                                       f"conversation {query.conversation!r}; the case fails (scored 0); fix: "
                                       f"write one line per turn, with qid {query.qid!r}")
        if found == 0:
            raise MissingResponseError(f"responses file {self.path} has no record for question {query.qid!r}; the "
                                       "case fails (scored 0); fix: record an answer for every question")
        if found > 1:
            raise DuplicateResponseError(f"responses file {self.path} has {found} records for question {query.qid!r}; "
                                         "the case fails; fix: keep one record per qid")
        return f.records[query.qid]
