"""Gold evidence -> chunks: id evidence by ``ref``, text evidence by exact normalised substring, then
(for evidence of >= 4 tokens) soft token coverage >= 0.8 (after OpenViking's exact + soft idea; its
exact ``check_recall`` lives in ``ragbench.judge.openviking``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragbench.text import normalize, normalize_joined, split_tokens, tokens
from ragbench.types import ChunkTree, Context, Evidence, Hit, Level, Query

MIN_SOFT_TOKENS = 4
SOFT_THRESHOLD = 0.8


@dataclass(frozen=True)
class EvidenceMap:
    """For one query: the anchor chunks of each evidence item (empty tuple = unmatched)."""

    anchors: tuple[tuple[str, ...], ...]
    relevance: tuple[int, ...]
    texts: tuple[str, ...]
    how: tuple[str, ...]  # "id" | "exact" | "soft" | "unmatched" per evidence item

    @property
    def matched(self) -> list[int]:
        return [i for i, a in enumerate(self.anchors) if a]


def covers(tree: ChunkTree, chunk_id: str, anchors: Sequence[str]) -> bool:
    """True when the chunk lies inside an anchor or contains one."""
    lineage = set(tree.lineage(chunk_id))
    return any(a in lineage or chunk_id in tree.lineage(a) for a in anchors)


def soft_match(evidence: str, text: str, *, threshold: float = SOFT_THRESHOLD) -> bool:
    """Exact normalised substring; else, for evidence of >= 4 tokens, token coverage >= threshold."""
    return _NormedText(normalize(text)).soft_match(evidence, threshold=threshold)


class _NormedText:
    """A ``normalize``-d text that several evidence strings are matched against (normalised and split
    once, not once per evidence string)."""

    def __init__(self, normed: str) -> None:
        self.normed = normed
        self._present: set[str] | None = None

    def soft_match(self, evidence: str, *, threshold: float = SOFT_THRESHOLD) -> bool:
        ev = normalize(evidence)
        if not ev:
            return False
        if ev in self.normed:
            return True
        if self._present is None:
            self._present = set(split_tokens(self.normed))
        return soft_covered(split_tokens(ev), self._present, threshold=threshold)


def soft_covered(ev_toks: Sequence[str], present: set[str], *, threshold: float = SOFT_THRESHOLD) -> bool:
    """The soft rule: evidence of >= 4 tokens whose tokens (with repeats) are ``present`` at >= threshold."""
    if len(ev_toks) < MIN_SOFT_TOKENS:
        return False
    return sum(t in present for t in ev_toks) / len(ev_toks) >= threshold


def evidence_text_recall(evidence_texts: Sequence[str], retrieved_texts: Sequence[str]) -> float | None:
    """ragbench's evidence text recall: the share of evidence texts (id evidence: the text of its
    paragraphs) found in the joined retrieved texts by ``soft_match`` -- normalised substring, else
    coverage >= 0.8 of the evidence's tokens (counted with repeats) for evidence of >= 4 tokens. Not
    OpenViking's ``check_recall`` (see ``ragbench.judge.openviking``). None without evidence."""
    if not evidence_texts:
        return None
    joined = _NormedText(normalize_joined(retrieved_texts))
    return sum(joined.soft_match(e) for e in evidence_texts) / len(evidence_texts)


class EvidenceMatcher:
    """Maps each query's evidence onto a chunk tree; reuses normalised texts across queries."""

    def __init__(self, tree: ChunkTree) -> None:
        self.tree = tree
        self._by_doc_level: dict[tuple[str, Level], list[str]] = defaultdict(list)
        self._by_ref: dict[str, list[str]] = defaultdict(list)
        self._norm: dict[str, str] = {}
        self._toks: dict[str, set[str]] = {}
        self._all_docs = sorted({c.doc_id for c in tree.chunks.values()})
        for c in tree.chunks.values():
            self._by_doc_level[(c.doc_id, c.level)].append(c.chunk_id)
            for r in c.refs:
                self._by_ref[r].append(c.chunk_id)

    def _normed(self, chunk_id: str) -> str:
        if chunk_id not in self._norm:
            self._norm[chunk_id] = normalize(self.tree[chunk_id].text)
        return self._norm[chunk_id]

    def _tokens(self, chunk_id: str) -> set[str]:
        if chunk_id not in self._toks:
            self._toks[chunk_id] = set(split_tokens(self._normed(chunk_id)))
        return self._toks[chunk_id]

    def _candidates(self, ev: Evidence, query: Query, level: Level) -> list[str]:
        docs = [ev.doc_id] if ev.doc_id else list(query.doc_ids) or self._all_docs
        return [cid for d in docs for cid in self._by_doc_level.get((d, level), [])]

    def _match_one(self, ev: Evidence, query: Query) -> tuple[tuple[str, ...], str, str]:
        if ev.ref:
            found = [
                cid for cid in self._by_ref.get(ev.ref, [])
                if (ev.doc_id is None or self.tree[cid].doc_id == ev.doc_id)
            ]
            if not found and ev.ref in self.tree.chunks:  # custom QA may cite ragbench chunk ids
                found = [ev.ref]
            if found:
                low = min(self.tree[c].level for c in found)
                anchors = tuple(c for c in found if self.tree[c].level == low)
                text = ev.text or " ".join(self.tree[self.tree.ancestor(a, Level.PARAGRAPH).chunk_id].text
                                           for a in dict.fromkeys(
                                               self.tree.ancestor(a, Level.PARAGRAPH).chunk_id for a in anchors))
                return anchors, "id", text
            if not ev.text:
                return (), "unmatched", ""
        text = ev.text or ""
        needle = normalize(text)
        if not needle:
            return (), "unmatched", text
        for level in (Level.SENTENCE, Level.PARAGRAPH, Level.SECTION):
            hits = tuple(c for c in self._candidates(ev, query, level) if needle in self._normed(c))
            if hits:
                return hits, "exact", text
        ev_toks = tokens(text)
        if len(ev_toks) >= MIN_SOFT_TOKENS:
            for level in (Level.SENTENCE, Level.PARAGRAPH):
                scored = [c for c in self._candidates(ev, query, level) if soft_covered(ev_toks, self._tokens(c))]
                if scored:
                    return tuple(scored), "soft", text
        return (), "unmatched", text

    def match(self, query: Query) -> EvidenceMap:
        """Anchors of every evidence item of ``query``."""
        results = [self._match_one(ev, query) for ev in query.evidence]
        return EvidenceMap(
            anchors=tuple(r[0] for r in results),
            relevance=tuple(ev.relevance for ev in query.evidence),
            texts=tuple(r[2] for r in results),
            how=tuple(r[1] for r in results),
        )


def relevant_searchable(tree: ChunkTree, emap: EvidenceMap) -> dict[str, int]:
    """qrels over all searchable chunks (every searched level): those inside an anchor, or the one
    containing it."""
    qrels: dict[str, int] = {}
    for i, anchors in enumerate(emap.anchors):
        for a in anchors:
            for level in tree.searched_levels:
                if tree[a].level >= level:
                    found = tree.descendants(a, level)
                else:
                    found = [tree.ancestor(a, level)]
                for c in found:
                    if c.level == level:
                        qrels[c.chunk_id] = max(qrels.get(c.chunk_id, 0), emap.relevance[i])
    return qrels


def hit_units(tree: ChunkTree, emap: EvidenceMap, hits: Sequence[Hit]) -> list[list[str]]:
    """For each hit, the matched evidence items (``ev<i>``) it covers (lies inside or contains)."""
    return [[f"ev{i}" for i, anchors in enumerate(emap.anchors) if anchors and covers(tree, h.chunk_id, anchors)]
            for h in hits]


def unit_qrels(emap: EvidenceMap) -> dict[str, int]:
    """qrels over evidence units: every matched evidence item with its grade."""
    return {f"ev{i}": emap.relevance[i] for i in emap.matched}


def unit_ranking_of(hit_ids: Sequence[str], covered: Sequence[Sequence[str]]) -> list[str]:
    """Ranking over evidence units: each hit contributes the units it newly covers, or -- when it
    covers none or only units seen above it -- itself as one non-relevant entry. So every hit holds at
    least one rank and a cut at k hits is a cut at k ranks unless a hit brings several new units."""
    seen: set[str] = set()
    ranking: list[str] = []
    for hit_id, units in zip(hit_ids, covered, strict=True):
        new = [u for u in dict.fromkeys(units) if u not in seen]
        ranking.extend(new or [hit_id])
        seen.update(new)
    return ranking


def unit_ranking(tree: ChunkTree, emap: EvidenceMap, hits: Sequence[Hit]) -> tuple[list[str], dict[str, int]]:
    """``unit_ranking_of`` the hits, with the evidence-unit qrels."""
    ranking = unit_ranking_of([h.chunk_id for h in hits], hit_units(tree, emap, hits))
    return ranking, unit_qrels(emap)


def context_has_evidence(tree: ChunkTree, emap: EvidenceMap, context: Context) -> bool:
    """True when the context (its kept parts, or its whole chunk) covers any matched evidence item
    (for citation hit rate)."""
    parts = context.part_ids or (context.chunk_id,)
    return any(anchors and any(covers(tree, p, anchors) for p in parts) for anchors in emap.anchors)


def match_stats(maps: Mapping[str, EvidenceMap]) -> dict[str, int]:
    """Counts of evidence items by how they matched, over all queries."""
    out = {"evidence/items": 0, "evidence/matched_id": 0, "evidence/matched_exact": 0,
           "evidence/matched_soft": 0, "evidence/unmatched": 0}
    for m in maps.values():
        for how in m.how:
            out["evidence/items"] += 1
            out["evidence/unmatched" if how == "unmatched" else f"evidence/matched_{how}"] += 1
    return out
