"""An outside system's contexts -> the dataset's chunks: by id when a context carries one (a chunk id, a
document id, or the dataset's own paragraph id), else by ragbench's exact-then-soft text matching of quotes
(``ragbench.evidence.EvidenceMatcher``: normalised substring, then token coverage >= 0.8). Each context says
how it matched (``id`` | ``exact`` | ``soft`` | ``unmatched``); an unmatched one still reaches the
generator and the judges as text, but ranks nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ragbench.evidence import EvidenceMatcher
from ragbench.systems.records import SystemContext, SystemRecord
from ragbench.types import ChunkTree, Evidence, Hit, Level, Query

HOWS = ("id", "exact", "soft", "unmatched")


@dataclass(frozen=True)
class MatchedContext:
    """A system context and the chunk it was matched to (None: unmatched), and how."""

    context: SystemContext
    chunk_id: str | None
    how: str


@dataclass(frozen=True)
class MatchedRecord:
    """A record with each context matched; ``hits`` ranks the distinct matched chunks in context order."""

    record: SystemRecord
    contexts: tuple[MatchedContext, ...]
    steps: tuple[tuple[MatchedContext, ...], ...] = ()  # each trajectory step's contexts, matched

    @property
    def hits(self) -> list[Hit]:
        return ranked_hits(self.contexts)

    def counts(self) -> Counter[str]:
        return Counter(m.how for m in self.contexts)


class ContextMatcher:
    """Matches records' contexts onto one chunk tree (its text forms are normalised once)."""

    def __init__(self, tree: ChunkTree) -> None:
        self.tree = tree
        self.evidence = EvidenceMatcher(tree)
        self._doc: dict[str, str] = {}
        units: dict[str, list[str]] = {}
        for c in tree.chunks.values():
            if c.level == Level.DOCUMENT:
                self._doc.setdefault(c.doc_id, c.chunk_id)
        for c in tree.searchable():
            units.setdefault(c.doc_id, []).append(c.chunk_id)
        for doc, found in units.items():  # chunker=document: the document's one searchable unit
            if len(found) == 1:
                self._doc.setdefault(doc, found[0])

    def match(self, record: SystemRecord) -> MatchedRecord:
        return MatchedRecord(record=record, contexts=self._matched(record.qid, record.contexts),
                             steps=tuple(self._matched(record.qid, s.contexts) for s in record.trajectory))

    def _matched(self, qid: str, contexts: Sequence[SystemContext]) -> tuple[MatchedContext, ...]:
        out: list[MatchedContext] = []
        for ctx in contexts:
            if ctx.id is not None and ctx.id not in self.tree.chunks and ctx.id in self._doc:
                chunk_id = self._doc[ctx.id]
                out.append(MatchedContext(ctx if ctx.text else _with_text(ctx, self.tree[chunk_id].text),
                                          chunk_id, "id"))
                continue
            probe = Query(qid=qid, text="", answers=(), question_type="",
                          evidence=(Evidence(ref=ctx.id, text=ctx.text or None),))
            emap = self.evidence.match(probe)
            anchors, how = emap.anchors[0], emap.how[0]
            found: str | None = anchors[0] if anchors else None
            text = ctx.text or (self.tree[found].text if found else "")
            out.append(MatchedContext(_with_text(ctx, text), found, how if found else "unmatched"))
        return tuple(out)


def ranked_hits(contexts: Sequence[MatchedContext]) -> list[Hit]:
    """The distinct matched chunks of ``contexts`` in their order, as hits (a context without a score ranks
    by its place)."""
    out: list[Hit] = []
    seen: set[str] = set()
    for m in contexts:
        if m.chunk_id is not None and m.chunk_id not in seen:
            seen.add(m.chunk_id)
            score = m.context.score if m.context.score is not None else float(len(contexts) - len(out))
            out.append(Hit(chunk_id=m.chunk_id, score=score, rank=len(out) + 1))
    return out


def _with_text(ctx: SystemContext, text: str) -> SystemContext:
    return ctx if ctx.text == text else SystemContext(id=ctx.id, text=text, score=ctx.score)


def total_counts(records: Sequence[MatchedRecord]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for r in records:
        total.update(r.counts())
    return {how: total.get(how, 0) for how in HOWS}
