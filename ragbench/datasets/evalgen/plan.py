"""Which evidence each generated question is asked about: a seeded plan over the chunk tree, stratified
over documents and sections, with a question type per slot."""

from __future__ import annotations

import math
import random
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragbench.datasets.evalgen.prompts import QUESTION_TYPES, Passage
from ragbench.errors import ConfigError
from ragbench.text import tokens
from ragbench.types import ChunkTree, Level

_DATE = re.compile(
    r"\b(1[5-9]\d\d|20\d\d)\b|\b\d{1,2}[./-]\d{1,2}[./-]\d{2,4}\b|"
    r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}\b|"
    r"\b\d{1,2}\s+(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b|\d{4}年|\d{1,2}月\d{1,2}日",
    re.IGNORECASE)
_STOP = frozenset("is are was were be been of to in on at for and or by with from as it its this that these "
                  "those he she they we you i his her their our not no but if then than so such can will "
                  "would should could has have had do does did which who what when where how".split())
TWO_PASSAGE_TYPES = ("multi_hop", "comparison")


@dataclass(frozen=True)
class Slot:
    """One planned question: its position, type and the paragraph chunks it is asked about."""

    index: int
    question_type: str
    chunk_ids: tuple[str, ...]


def has_date(text: str) -> bool:
    """Whether the text names a year, a date or a day of a month."""
    return bool(_DATE.search(text))


def _content(text: str) -> frozenset[str]:
    return frozenset(t for t in tokens(text) if t not in _STOP and len(t) > 2)


def type_quota(weights: Mapping[str, float], n: int) -> dict[str, int]:
    """How many of ``n`` slots each type gets (largest remainder); unknown types are a ConfigError."""
    unknown = sorted(set(weights) - set(QUESTION_TYPES))
    if unknown or any(float(w) < 0 for w in weights.values()) or not sum(weights.values()):
        raise ConfigError(f"types={dict(weights)} is not valid\n  fix: give weights >= 0 (not all 0) to types "
                          f"among {list(QUESTION_TYPES)}, e.g. types.factual=1 types.unanswerable=0")
    total = float(sum(weights.values()))
    exact = {t: n * float(w) / total for t, w in weights.items()}
    quota = {t: math.floor(v) for t, v in exact.items()}
    for t in sorted(exact, key=lambda t: (quota[t] - exact[t], t))[: n - sum(quota.values())]:
        quota[t] += 1
    return quota


def stratified_order(tree: ChunkTree, rng: random.Random, *, min_words: int) -> list[str]:
    """Paragraph ids of at least ``min_words`` words, interleaved round-robin over documents and, within
    a document, over its sections (each shuffled), so the first N cover as many of both as they can."""
    by_doc: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for c in tree.at_level(Level.PARAGRAPH):
        if len(c.text.split()) >= min_words or len(tokens(c.text)) >= min_words:
            by_doc[c.doc_id][c.parent_id or c.doc_id].append(c.chunk_id)

    def interleave(lists: list[list[str]]) -> list[str]:
        out: list[str] = []
        for i in range(max((len(x) for x in lists), default=0)):
            out.extend(x[i] for x in lists if i < len(x))
        return out

    per_doc = []
    for doc in sorted(by_doc):
        sections = [sorted(ids) for _, ids in sorted(by_doc[doc].items())]
        for ids in sections:
            rng.shuffle(ids)
        rng.shuffle(sections)
        per_doc.append(interleave(sections))
    rng.shuffle(per_doc)
    return interleave(per_doc)


def _partner(tree: ChunkTree, pid: str, order: Sequence[str], words: Mapping[str, frozenset[str]]) -> str | None:
    """The paragraph of another section sharing most content words with ``pid`` (same document first)."""
    me = tree[pid]
    best: tuple[tuple[int, float], str] | None = None
    for other in order:
        c = tree[other]
        if c.parent_id == me.parent_id:
            continue
        union = len(words[pid] | words[other]) or 1
        score = (int(c.doc_id == me.doc_id), len(words[pid] & words[other]) / union)
        if best is None or score > best[0]:
            best = (score, other)
    return best[1] if best else None


def plan(tree: ChunkTree, *, n: int, weights: Mapping[str, float], seed: int, min_words: int = 8) -> list[Slot]:
    """``n`` slots: types by ``weights`` (shuffled), evidence in stratified order. A temporal slot moves to
    the next paragraph with a date (factual when none has one); a two-passage type takes a partner
    paragraph from another section (factual when the corpus has a single section)."""
    rng = random.Random(seed)
    order = stratified_order(tree, rng, min_words=min_words)
    if not order:
        return []
    types = [t for t, k in sorted(type_quota(weights, n).items()) for _ in range(k)]
    rng.shuffle(types)
    words = {pid: _content(tree[pid].text) for pid in order}
    dated = [i for i, pid in enumerate(order) if has_date(tree[pid].text)]
    slots: list[Slot] = []
    for i, qtype in enumerate(types):
        pos = i % len(order)
        ids: tuple[str, ...] = (order[pos],)
        if qtype == "temporal":
            after = [d for d in dated if d >= pos] or dated
            if after:
                ids = (order[after[0]],)
            else:
                qtype = "factual"
        elif qtype in TWO_PASSAGE_TYPES:
            other = _partner(tree, order[pos], order, words)
            if other is None:
                qtype = "factual"
            else:
                ids = (order[pos], other)
        slots.append(Slot(index=i, question_type=qtype, chunk_ids=ids))
    return slots


def passages(tree: ChunkTree, chunk_ids: Sequence[str]) -> list[Passage]:
    """The passages shown to a model (heading path as the title)."""
    out = []
    for cid in chunk_ids:
        parts = [h for h in tree[cid].heading if h]
        if len(parts) > 1 and parts[1].startswith(parts[0]):  # a section title that already names the document
            parts = parts[1:]
        out.append(Passage(chunk_id=cid, title=" > ".join(parts), text=tree[cid].text))
    return out
