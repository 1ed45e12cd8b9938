"""Frozen dataclasses passed between pipeline stages (dataset -> chunks -> hits -> contexts -> answer)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType
from typing import Any

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class Level(IntEnum):
    """Depth of a chunk in the document tree; ``parent_depth`` counts in these units."""

    SENTENCE = 0
    PARAGRAPH = 1
    SECTION = 2
    DOCUMENT = 3


# ---------------------------------------------------------------- dataset side
@dataclass(frozen=True)
class Paragraph:
    """One paragraph of source text; ``ref`` is the dataset's own id for it (LoCoMo ``dia_id``, a page)."""

    text: str
    ref: str | None = None
    meta: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class Section:
    """A titled run of paragraphs (a LoCoMo session, a paper section, a PDF page)."""

    title: str
    paragraphs: tuple[Paragraph, ...]
    ref: str | None = None
    meta: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class Document:
    """A source document.

    Structured adapters fill ``sections``; adapters of raw text (custom folders, syllabi) leave
    ``sections`` empty and put the text in ``text`` for the chunker to segment.
    """

    doc_id: str
    title: str
    sections: tuple[Section, ...] = ()
    text: str | None = None
    meta: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class Evidence:
    """One piece of gold evidence: a dataset id (``ref``), a quote (``text``), or both.

    ``relevance`` is the graded relevance (1 when the dataset has no grades).
    """

    ref: str | None = None
    text: str | None = None
    doc_id: str | None = None
    relevance: int = 1


@dataclass(frozen=True)
class OpenVikingQA:
    """A question as OpenViking's own adapter (``benchmark/RAG/src/adapters``) reads it: whether it keeps
    the question (``kept``; it skips e.g. SyllabusQA "no answer") and the evidence list it hands to
    ``check_recall`` (raw strings, its own stripping and de-duplication)."""

    evidence: tuple[str, ...] = ()
    kept: bool = True


@dataclass(frozen=True)
class Turn:
    """An earlier turn of a conversation, as a later turn's history (ragbench.generate.history): the user's
    message, the answer (the reference answer as the data gives it), and the turn's question id."""

    text: str
    answer: str | None = None
    qid: str = ""


@dataclass(frozen=True)
class Query:
    """A question with its gold answers, evidence and question type.

    ``openviking`` is set by adapters of datasets OpenViking has an adapter for; None derives
    OpenViking's evidence list from ``evidence`` (``ragbench.judge.context.openviking_evidence``).
    """

    qid: str
    text: str
    answers: tuple[str, ...]
    question_type: str
    answerable: bool = True
    evidence: tuple[Evidence, ...] = ()
    doc_ids: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    openviking: OpenVikingQA | None = None
    # a conversation's turn (docs/conversations.md): its conversation id, its 1-based index, the earlier turns
    conversation: str | None = None
    turn: int = 0
    history: tuple[Turn, ...] = ()


@dataclass(frozen=True)
class EvalSet:
    """What a dataset adapter returns: documents, queries and how they were read.

    ``fingerprint`` is the SHA-256 over the bytes read plus the sampling spec; ``stats`` holds
    counters such as unparseable evidence ids, so nothing the adapter skipped is silent.
    """

    name: str
    documents: tuple[Document, ...]
    queries: tuple[Query, ...]
    fingerprint: str
    variant: str
    files: tuple[str, ...] = ()
    root: str = ""
    stats: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    tags: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


# ---------------------------------------------------------------- chunk side
@dataclass(frozen=True)
class Chunk:
    """A node of the chunk tree. ``refs`` carries dataset ids of the paragraphs it covers."""

    chunk_id: str
    doc_id: str
    level: Level
    text: str
    parent_id: str | None
    children: tuple[str, ...] = ()
    refs: tuple[str, ...] = ()
    heading: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class ChunkTree:
    """All chunks of a corpus, by id, plus which level is embedded and searched.

    ``also_searched`` adds parent levels to the searched set (EasyRAG's parent vectors).
    """

    chunks: Mapping[str, Chunk]
    search_level: Level = Level.SENTENCE
    also_searched: tuple[Level, ...] = ()

    @property
    def searched_levels(self) -> tuple[Level, ...]:
        return (self.search_level, *self.also_searched)

    def __getitem__(self, chunk_id: str) -> Chunk:
        return self.chunks[chunk_id]

    def at_level(self, level: Level) -> list[Chunk]:
        """Chunks of one level, in document order."""
        return [c for c in self.chunks.values() if c.level == level]

    def searchable(self) -> list[Chunk]:
        """The chunks that are embedded and searched: the search level in document order, then any
        parent level in ``also_searched``."""
        out = self.at_level(self.search_level)
        for level in self.also_searched:
            out.extend(self.at_level(level))
        return out

    def ancestor(self, chunk_id: str, level: Level) -> Chunk:
        """The chunk itself if it is at ``level`` or above, else its ancestor at ``level``."""
        chunk = self.chunks[chunk_id]
        while chunk.level < level and chunk.parent_id is not None:
            chunk = self.chunks[chunk.parent_id]
        return chunk

    def lineage(self, chunk_id: str) -> list[str]:
        """The chunk id followed by all its ancestors' ids, up to the document."""
        out = [chunk_id]
        chunk = self.chunks[chunk_id]
        while chunk.parent_id is not None:
            out.append(chunk.parent_id)
            chunk = self.chunks[chunk.parent_id]
        return out

    def descendants(self, chunk_id: str, level: Level) -> list[Chunk]:
        """Descendants at ``level`` (the chunk itself if it is already there), in order."""
        chunk = self.chunks[chunk_id]
        if chunk.level <= level:
            return [chunk]
        out: list[Chunk] = []
        for child in chunk.children:
            out.extend(self.descendants(child, level))
        return out


# ---------------------------------------------------------------- query side
@dataclass(frozen=True)
class Hit:
    """A retrieved chunk with its score and 1-based rank."""

    chunk_id: str
    score: float
    rank: int


@dataclass(frozen=True)
class Context:
    """A passage handed to the generator: an expanded parent of one or more hits.

    ``part_ids`` names the chunks under ``chunk_id`` whose text the context holds when the expander
    kept only part of the target (``child_depth`` > 0); empty means the whole target.
    """

    chunk_id: str
    text: str
    title: str
    level: Level
    hit_ids: tuple[str, ...]
    truncated: bool = False
    part_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Usage:
    """Token and cost accounting of one model call (zeros for offline components)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached: bool = False


@dataclass(frozen=True)
class Answer:
    """A generated answer; ``citations`` are the 1-based context numbers the answer cites."""

    text: str
    model: str
    latency_s: float = 0.0
    usage: Usage = Usage()
    citations: tuple[int, ...] = ()
    # each cited sentence and the context numbers it cites (ragbench.generate.citations.cited_sentences)
    cited: tuple[tuple[str, tuple[int, ...]], ...] = ()
    raw_text: str | None = None  # with dataset.postprocess: the answer as generated (``text`` is processed)


@dataclass(frozen=True)
class CaseResult:
    """Everything about one query: retrieval, contexts, answer, scores, and failure if any."""

    query: Query
    hits: tuple[Hit, ...]
    contexts: tuple[Context, ...]
    answer: Answer | None
    scores: Mapping[str, float]
    status: str = "ok"  # "ok" | "failed" | "skipped" (not run: the budget was reached; ragbench.budget)
    error_type: str | None = None
    error: str | None = None
    latency: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    judge_notes: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)  # per judge: rubric, reasoning
    # per-stage candidates (trace=true) and rerankers that could not score and kept the order they got
    trace: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    # repeats=N (N > 1): per repeat its answer, citations and answer scores (ragbench.repeats); ``scores``
    # then holds the repeats' reduced values
    repeats: tuple[Mapping[str, Any], ...] = ()
    reducer: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    @property
    def skipped(self) -> bool:
        """Not run (budget reached): neither scored nor failed; counted as ``cases/skipped``."""
        return self.status == "skipped"
