"""Rules every adapter's output goes through (``BaseAdapter.load``), so no adapter can skip them:

- ids unique per dataset: a repeated document or question id is a DatasetError naming the file, the
  id and the field it comes from (two questions with one id would overwrite each other's evidence);
- a question must have text, and an answerable question a non-blank gold answer: otherwise it is
  dropped and counted (``dataset/qa_dropped_empty_question``, ``dataset/qa_dropped_no_gold``), because
  a blank gold scores any refusal as F1 1.0;
- one document's text must fit ``dataset.max_document_mb`` (a DatasetError naming the key to raise).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence

from ragbench.datasets.limits import Limits, TooLarge, too_large
from ragbench.errors import DatasetError
from ragbench.types import Document, Query

log = logging.getLogger(__name__)


def duplicates(ids: Iterable[str]) -> dict[str, int]:
    """Ids that occur more than once, with their counts, in first-seen order."""
    return {i: n for i, n in Counter(ids).items() if n > 1}


def unique_ids(kind: str, ids: Sequence[str], *, dataset: str, file: str, field: str, fix: str) -> None:
    """A DatasetError when ``ids`` repeat: names the first repeated id, how often, and how many repeat."""
    dup = duplicates(ids)
    if not dup:
        return
    first, n = next(iter(dup.items()))
    more = f" ({len(dup)} ids repeat in all)" if len(dup) > 1 else ""
    raise DatasetError(
        f"{kind} id {first!r} occurs {n} times{more}; ids must be unique per dataset (records with one id "
        "would overwrite each other's evidence and scores)",
        dataset=dataset, file=file, field=field, fix=fix,
    )


def document_text_size(doc: Document) -> int:
    """Characters of a document's text (raw text plus every paragraph)."""
    return len(doc.text or "") + sum(len(p.text) for s in doc.sections for p in s.paragraphs)


def check_documents(docs: Sequence[Document], limits: Limits, *, dataset: str, file: str) -> None:
    """Every document within ``max_document_mb``."""
    for doc in docs:
        try:
            limits.check_document(f"the text of document {doc.doc_id!r}", document_text_size(doc))
        except TooLarge as exc:
            raise too_large(exc, dataset=dataset, file=str(doc.meta.get("file") or file)) from None


def usable_queries(queries: Sequence[Query], stats: dict[str, int], *, dataset: str,
                   require_gold: bool = True) -> list[Query]:
    """Queries without text, and answerable ones without a non-blank gold (when ``require_gold``: a dataset
    of retrieval judgements alone, BEIR, has none), dropped and counted."""
    kept: list[Query] = []
    empty = no_gold = 0
    for q in queries:
        if not q.text.strip():
            empty += 1
        elif require_gold and q.answerable and not any(a.strip() for a in q.answers):
            no_gold += 1
        else:
            kept.append(q)
    stats["qa_dropped_empty_question"] = empty
    stats["qa_dropped_no_gold"] = no_gold
    if empty or no_gold:
        log.warning("%s: dropped %d questions with empty text and %d answerable questions without a gold "
                    "answer (counted in dataset/qa_dropped_empty_question, dataset/qa_dropped_no_gold)",
                    dataset, empty, no_gold)
    return kept
