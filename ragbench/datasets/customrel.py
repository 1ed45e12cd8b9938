"""Relevance in the custom adapter's QA file: which documents a name or a quote leads to, whether an evidence
item can match the chunks, and the stop when none of it can."""

from __future__ import annotations

import logging
from pathlib import Path

from ragbench.datasets.customqa import EVIDENCE_FORMS
from ragbench.errors import DatasetError
from ragbench.evidence import soft_covered
from ragbench.text import loose_normalize, normalize, split_tokens, tokens
from ragbench.types import Document, Evidence, Query

log = logging.getLogger("ragbench.datasets.custom")


def names_document(ev: Evidence) -> bool:
    """Whether an evidence item is a whole document (relevance given per document): its ref is its document."""
    return ev.text is None and ev.ref is not None and ev.ref == ev.doc_id


def shown(ev: Evidence) -> str:
    value = ev.text or ev.ref or ""
    return repr(value if len(value) <= 60 else value[:57] + "...")


def check_matched(queries: list[Query], stats: dict[str, int], unmatched: list[str], *, dataset: str,
                   file: str) -> None:
    """Stops the load when the questions give evidence and none of it matches a document; a partial match is
    counted (``dataset/qa_evidence_not_found``) and warned about on the terminal. A set with neither evidence
    nor gold answers has nothing to score."""
    given = sum(1 for q in queries if q.evidence)
    if given and stats["qa_evidence_not_found"] == given:
        raise DatasetError(
            f"the evidence of none of the {given} questions matches a document (first: {unmatched[0]}); no "
            "retrieval metric could be computed", dataset=dataset, file=file, field="evidence",
            fix=f"copy quotes verbatim from the documents, or name documents: {EVIDENCE_FORMS}")
    if unmatched:
        log.warning("custom: the evidence of %d of %d questions matches no document (first: %s); they are left out "
                    "of the retrieval metrics (counted in dataset/qa_evidence_not_found)", len(unmatched), given,
                    unmatched[0])
    if queries and not given and not any(q.answers for q in queries):
        raise DatasetError(
            "the questions have neither evidence nor answers: nothing can be scored", dataset=dataset, file=file,
            field="answers", fix=f'give each question "answers", or its relevance: {EVIDENCE_FORMS}')


class CustomCorpus:
    """Where names and quotes lead: document ids (and, for files, file names and stems), normalised texts and
    token sets, the refs of each document's sections and paragraphs (PDF pages)."""

    def __init__(self, docs: list[Document], *, by_file: bool) -> None:
        self.names: dict[str, set[str]] = {}
        for d in docs:
            keys = {d.doc_id, d.doc_id.rsplit("/", 1)[-1], Path(d.doc_id).stem} if by_file else {d.doc_id}
            for key in keys:
                self.names.setdefault(key, set()).add(d.doc_id)
        texts = {d.doc_id: " ".join(p.text for s in d.sections for p in s.paragraphs) for d in docs}
        self.loose = {d: loose_normalize(t) for d, t in texts.items()}
        self._texts = texts
        self._tokens: dict[str, set[str]] = {}
        self.refs = {d.doc_id: {r for s in d.sections for r in (s.ref, *(p.ref for p in s.paragraphs)) if r}
                     for d in docs}

    def named(self, name: str) -> set[str]:
        """The documents ``name`` names (empty: none)."""
        return self.names.get(name) or (self.names.get(name.rsplit("/", 1)[-1], set()) if "/" in name else set())

    def containing(self, quote: str) -> list[str]:
        """The documents holding ``quote`` (exact, loosely normalised)."""
        needle = loose_normalize(quote)
        return [d for d, body in self.loose.items() if needle and needle in body]

    def _soft(self, quote: str, doc: str) -> bool:
        if doc not in self._tokens:
            self._tokens[doc] = set(split_tokens(normalize(self._texts[doc])))
        return soft_covered(tokens(quote), self._tokens[doc])

    def found(self, ev: Evidence) -> bool:
        """Whether an item can match the chunks: a named document; a ref that is a page of its document or a
        chunk id (``<doc>#...``) of a known document; a quote found exactly, or by the evidence matcher's soft
        rule, in its document (any document when it names none)."""
        if names_document(ev):
            return True
        docs = [ev.doc_id] if ev.doc_id else list(self.loose)
        if ev.ref and (any(ev.ref in self.refs.get(d, ()) for d in docs)
                       or ev.ref.partition("#")[0] in self.loose and "#" in ev.ref):
            return True
        if not ev.text:
            return False
        needle = loose_normalize(ev.text)
        if needle and any(needle in self.loose.get(d, "") for d in docs):
            return True
        return len(tokens(ev.text)) >= 4 and any(self._soft(ev.text, d) for d in docs if d in self._texts)
