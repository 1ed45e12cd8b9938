"""The offline baseline answerer: no model, picks the context sentence that best overlaps the question."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ragbench.ingest.sentences import split_sentences
from ragbench.text import NOT_MENTIONED, normalize
from ragbench.types import Answer, Context, Query

STOPWORDS = frozenset(
    """a an the of to in on at for from by with about as is are was were be been being do does did has have
    had what which who whom whose when where why how that this these those it its i you he she we they me him
    her us them my your his our their and or but if then than so not no yes can could would should will shall
    may might must there here into over under after before during while any some all each every other such
    only own same too very s t just don now""".split()
)


def content_words(text: str) -> list[str]:
    """Normalised tokens without stopwords."""
    return [t for t in normalize(text).split() if t not in STOPWORDS]


class ExtractiveAnswerer:
    """A deterministic extractive baseline, not an LLM: it answers with the words of the best-supporting
    context sentence that the question does not already contain, and says "Not mentioned" when no
    sentence shares at least ``min_overlap`` of the question's content words."""

    max_concurrency = 1

    def __init__(self, *, min_overlap: float = 0.34, strip_question_words: bool = True, model: str = "") -> None:
        self.min_overlap = min_overlap
        self.strip_question_words = strip_question_words

    @property
    def identity(self) -> str:
        return f"extractive-baseline(min_overlap={self.min_overlap},strip={self.strip_question_words})"

    def answer(self, query: Query, contexts: Sequence[Context]) -> Answer:
        """The best span, with the number of the context it came from as its citation."""
        start = time.perf_counter()
        q = set(content_words(query.text))
        best: tuple[float, int, str] = (0.0, 0, "")
        for n, ctx in enumerate(contexts, start=1):
            for sentence in split_sentences(ctx.text):
                words = content_words(sentence)
                if not words or not q:
                    continue
                overlap = len(q & set(words)) / len(q)
                if overlap > best[0]:
                    best = (overlap, n, sentence)
        overlap, n, sentence = best
        if overlap < self.min_overlap or not sentence:
            return Answer(text=NOT_MENTIONED, model=self.identity, latency_s=time.perf_counter() - start)
        text = sentence.split(": ", 1)[1] if ": " in sentence[:40] else sentence  # drop a speaker tag
        if self.strip_question_words:
            kept = [w for w in text.split() if normalize(w) not in q or not normalize(w)]
            stripped = " ".join(kept).strip(" ,;:")
            if content_words(stripped):
                text = stripped
        return Answer(text=text, model=self.identity, latency_s=time.perf_counter() - start, citations=(n,))
