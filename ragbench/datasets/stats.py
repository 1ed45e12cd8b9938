"""Chunk-independent summary of a loaded dataset: documents, QA by type, evidence coverage."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ragbench.text import loose_normalize
from ragbench.types import Document, EvalSet, Evidence, Query


def qa_by_type(queries: Iterable[Query]) -> dict[str, int]:
    """Number of questions per question type, types sorted by name."""
    return dict(sorted(Counter(q.question_type for q in queries).items()))


@dataclass(frozen=True)
class TypeSummary:
    """Counts for one question type."""

    queries: int = 0
    answerable: int = 0
    with_evidence: int = 0
    evidence: int = 0
    evidence_found: int = 0


@dataclass(frozen=True)
class DatasetSummary:
    """What ``python -m ragbench.datasets stats`` prints (the EasyRAG ``stats`` view)."""

    name: str
    variant: str
    fingerprint: str
    documents: int
    sections: int
    paragraphs: int
    characters: int
    by_type: Mapping[str, TypeSummary]
    evidence_ref: int
    evidence_text: int
    adapter_stats: Mapping[str, int] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def queries(self) -> int:
        """Number of questions."""
        return sum(t.queries for t in self.by_type.values())

    @property
    def total(self) -> TypeSummary:
        """All types added up."""
        keys = ("queries", "answerable", "with_evidence", "evidence", "evidence_found")
        return TypeSummary(**{k: sum(getattr(t, k) for t in self.by_type.values()) for k in keys})


class _Corpus:
    """Per-document normalised text and refs, to check evidence before any chunking."""

    def __init__(self, docs: Iterable[Document]) -> None:
        self.text: dict[str, str] = {}
        self.refs: dict[str, set[str]] = {}
        for d in docs:
            parts = [d.text or ""] + [p.text for s in d.sections for p in s.paragraphs]
            self.text[d.doc_id] = loose_normalize(" ".join(parts))
            self.refs[d.doc_id] = {r for s in d.sections for r in [s.ref, *(p.ref for p in s.paragraphs)] if r}

    def found(self, ev: Evidence, scope: tuple[str, ...]) -> bool:
        ids = (ev.doc_id,) if ev.doc_id else scope or tuple(self.text)
        if ev.ref is not None and any(ev.ref in self.refs.get(i, ()) for i in ids):
            return True
        needle = loose_normalize(ev.text or "")
        return bool(needle) and any(needle in self.text.get(i, "") for i in ids)


def summarize(es: EvalSet) -> DatasetSummary:
    """Counts of documents and questions by type; evidence "found" = its ref exists or its quote occurs
    verbatim (normalised) in the document it names (or the question's documents)."""
    corpus = _Corpus(es.documents)
    per: dict[str, dict[str, int]] = {}
    for q in es.queries:
        row = per.setdefault(q.question_type, Counter())
        row["queries"] += 1
        row["answerable"] += q.answerable
        row["with_evidence"] += bool(q.evidence)
        row["evidence"] += len(q.evidence)
        row["evidence_found"] += sum(corpus.found(ev, q.doc_ids) for ev in q.evidence)
    return DatasetSummary(
        name=es.name, variant=es.variant, fingerprint=es.fingerprint,
        documents=len(es.documents),
        sections=sum(len(d.sections) for d in es.documents),
        paragraphs=sum(len(s.paragraphs) for d in es.documents for s in d.sections),
        characters=sum(len(d.text or "") + sum(len(p.text) for s in d.sections for p in s.paragraphs)
                       for d in es.documents),
        by_type={t: TypeSummary(**row) for t, row in sorted(per.items())},
        evidence_ref=sum(1 for q in es.queries for ev in q.evidence if ev.ref is not None),
        evidence_text=sum(1 for q in es.queries for ev in q.evidence if ev.text),
        adapter_stats=dict(es.stats), tags=dict(es.tags),
    )


def counts(es: EvalSet) -> dict[str, int]:
    """Flat counts for logging: ``documents``, ``queries``, ``queries/<type>``, ``stats/<adapter key>``."""
    out = {"documents": len(es.documents), "queries": len(es.queries),
           "queries_unanswerable": sum(1 for q in es.queries if not q.answerable)}
    out.update({f"queries/{t}": n for t, n in qa_by_type(es.queries).items()})
    out.update({f"stats/{k}": int(v) for k, v in es.stats.items()})
    return out
