"""Gold evidence -> chunks: id evidence by ``ref``, text evidence by exact normalised substring, then
(for evidence of >= 4 tokens) soft token coverage >= 0.8 (after OpenViking's exact + soft idea; its
exact ``check_recall`` lives in ``ragbench.judge.openviking``)."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

from ragbench.metric_info import MetricInfo
from ragbench.text import normalize, normalize_joined, split_tokens, tokens
from ragbench.types import ChunkTree, Context, Evidence, Hit, Level, Query

MIN_SOFT_TOKENS = 4
RANKINGS_KEPT = 4  # per query (Coverage.ranking_scores): the rankings of the last few jobs
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
    return any(_covered(chunk_id, lineage, a, tree.lineage(a)) for a in anchors)


def _covered(chunk_id: str, lineage: set[str], anchor: str, anchor_lineage: Sequence[str] | set[str]) -> bool:
    """The covering rule: the chunk lies inside the anchor (the anchor is in the chunk's lineage) or
    contains it (the chunk is in the anchor's lineage)."""
    return anchor in lineage or chunk_id in anchor_lineage


@functools.lru_cache(maxsize=1 << 15)  # a question's evidence strings recur in every job of a sweep
def _evidence_form(evidence: str) -> tuple[str, tuple[str, ...]]:
    """An evidence string's normal form and its tokens."""
    normed = normalize(evidence)
    return normed, tuple(split_tokens(normed))


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
        ev, ev_toks = _evidence_form(evidence)
        if not ev:
            return False
        if ev in self.normed:
            return True
        if len(ev_toks) < MIN_SOFT_TOKENS:  # soft_covered's answer, without splitting the text
            return False
        if self._present is None:
            self._present = set(split_tokens(self.normed))
        return soft_covered(ev_toks, self._present, threshold=threshold)


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


class Coverage:
    """Which matched evidence items (``ev<i>``) each chunk covers -- lies inside or contains, ``covers`` --
    for one query on one tree: each anchor's lineage walked once, each chunk's answer kept; and the query's
    qrels at chunk and unit level, computed once. The pipeline keeps one per query for as long as the tree
    and the evidence mapping are reused (``ragbench.reuse``), so the jobs of a sweep share them."""

    def __init__(self, tree: ChunkTree, emap: EvidenceMap) -> None:
        self.tree = tree
        self.emap = emap
        self._matched = [(f"ev{i}", anchors) for i, anchors in enumerate(emap.anchors) if anchors]
        self._anchor_lineage: dict[str, set[str]] | None = None
        self._units: dict[str, tuple[str, ...]] = {}
        self._chunk_qrels: dict[str, int] | None = None
        self._unit_qrels: dict[str, int] | None = None
        self._ranking: dict[Hashable, Mapping[str, float]] = {}

    def ranking_scores(self, key: Hashable, compute: Callable[[], Mapping[str, float]]) -> Mapping[str, float]:
        """``compute()`` once per ``key`` (the ranked ids and the cut-offs: the retrieval scores of a ranking
        for this query, ``judge.retrieval.ranking_scores``); the same mapping after that (read it only)."""
        found = self._ranking.get(key)
        if found is None:
            found = self._ranking[key] = compute()
            if len(self._ranking) > RANKINGS_KEPT:  # a long sweep on one dataset: memory stays bounded
                del self._ranking[next(iter(self._ranking))]
        return found

    def chunk_qrels(self) -> dict[str, int]:
        """``relevant_searchable(tree, emap)``, computed once (the same dict each call: read it, never change it)."""
        if self._chunk_qrels is None:
            self._chunk_qrels = relevant_searchable(self.tree, self.emap)
        return self._chunk_qrels

    def unit_qrels(self) -> dict[str, int]:
        """``unit_qrels(emap)``, computed once (the same dict each call: read it, never change it)."""
        if self._unit_qrels is None:
            self._unit_qrels = unit_qrels(self.emap)
        return self._unit_qrels

    def units(self, chunk_id: str) -> tuple[str, ...]:
        """The matched items the chunk covers, in evidence order."""
        found = self._units.get(chunk_id)
        if found is None:
            if not self._matched or chunk_id not in self.tree.chunks:  # a system's context matched to no chunk
                found = ()
            else:
                if self._anchor_lineage is None:
                    self._anchor_lineage = {a: set(self.tree.lineage(a)) for _, anchors in self._matched
                                            for a in anchors}
                lineage = set(self.tree.lineage(chunk_id))
                found = tuple(unit for unit, anchors in self._matched
                              if any(_covered(chunk_id, lineage, a, self._anchor_lineage[a]) for a in anchors))
            self._units[chunk_id] = found
        return found

    def any_of(self, chunk_ids: Sequence[str]) -> bool:
        """True when one of the chunks covers a matched item."""
        return any(self.units(c) for c in chunk_ids)


def hit_units(tree: ChunkTree, emap: EvidenceMap, hits: Sequence[Hit],
              coverage: Coverage | None = None) -> list[list[str]]:
    """For each hit, the matched evidence items (``ev<i>``) it covers (lies inside or contains)."""
    cov = coverage or Coverage(tree, emap)
    return [list(cov.units(h.chunk_id)) for h in hits]


def unit_qrels(emap: EvidenceMap) -> dict[str, int]:
    """qrels over evidence units: every matched evidence item with its grade."""
    return {f"ev{i}": emap.relevance[i] for i in emap.matched}


def new_units(covered: Sequence[Sequence[str]]) -> list[list[str]]:
    """Per hit, the evidence units it covers that no hit above it covered (each unit once, in order)."""
    seen: set[str] = set()
    out: list[list[str]] = []
    for units in covered:
        new = [u for u in dict.fromkeys(units) if u not in seen]
        seen.update(new)
        out.append(new)
    return out


def unit_ranking_of(hit_ids: Sequence[str], covered: Sequence[Sequence[str]],
                    qrels: Mapping[str, int]) -> list[str]:
    """The ranking over evidence units, one entry per hit at the hit's rank: the highest-graded unit the
    hit newly covers (the first in evidence order on a tie), or the hit itself -- one non-relevant entry --
    when it brings no new unit. trec_eval's hit, precision, nDCG and MRR of this ranking against ``qrels``
    are ``judge.ir.covering_metrics``'s of the hits; recall and MAP there also count the other units a hit
    brings."""
    return [max(new, key=lambda u: qrels.get(u, 0)) if new else hit_id
            for hit_id, new in zip(hit_ids, new_units(covered), strict=True)]


def unit_ranking(tree: ChunkTree, emap: EvidenceMap, hits: Sequence[Hit]) -> tuple[list[str], dict[str, int]]:
    """``unit_ranking_of`` the hits, with the evidence-unit qrels."""
    qrels = unit_qrels(emap)
    return unit_ranking_of([h.chunk_id for h in hits], hit_units(tree, emap, hits), qrels), qrels


def context_has_evidence(tree: ChunkTree, emap: EvidenceMap, context: Context,
                         coverage: Coverage | None = None) -> bool:
    """True when the context (its kept parts, or its whole chunk) covers any matched evidence item
    (for citation hit rate)."""
    return (coverage or Coverage(tree, emap)).any_of(context.part_ids or (context.chunk_id,))


_ITEMS = "evidence items of the job's questions"
# match_stats' keys: the job's evidence items by how they matched the corpus
METRICS = {
    "evidence/items": MetricInfo(_ITEMS, "ragbench", kind="diagnostic", job_level="a count", unit="count"),
    "evidence/matched_<name>": MetricInfo(
        _ITEMS + " matched by dataset id (id), exact normalised substring (exact) or soft token coverage (soft)",
        "ragbench (after OpenViking's exact + soft matching)", kind="diagnostic", job_level="a count",
        unit="count"),
    "evidence/unmatched": MetricInfo(_ITEMS + " that match no chunk text (their questions have no retrieval "
                                     "scores)", "ragbench", higher_is_better=False, kind="diagnostic",
                                     job_level="a count", unit="count"),
}


def match_stats(maps: Mapping[str, EvidenceMap]) -> dict[str, int]:
    """Counts of evidence items by how they matched, over all queries."""
    out = {"evidence/items": 0, "evidence/matched_id": 0, "evidence/matched_exact": 0,
           "evidence/matched_soft": 0, "evidence/unmatched": 0}
    for m in maps.values():
        for how in m.how:
            out["evidence/items"] += 1
            out["evidence/unmatched" if how == "unmatched" else f"evidence/matched_{how}"] += 1
    return out
