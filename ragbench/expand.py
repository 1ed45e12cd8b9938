"""Small-to-big context expansion: hits climb to a target level, merge per parent, fit a token budget."""

from __future__ import annotations

from collections.abc import Sequence

from ragbench.errors import ConfigError
from ragbench.types import ChunkTree, Context, Hit, Level


def count_tokens(text: str) -> int:
    """Whitespace-token count: the unit of context budgets and per-1k-token figures."""
    return len(text.split())


class ParentExpander:
    """``parent_depth`` is the target level (0 sentence, 1 paragraph, 2 section), never exceeded.

    A hit below the target climbs to its ancestor at that level; a hit at or above it stays as it
    is. Hits sharing a target merge into one context that keeps every triggering hit id, ordered by
    its best hit. ``max_context_tokens`` caps the total: the last context is cut at a sentence
    boundary and marked truncated; later ones are dropped.
    """

    def __init__(self, *, parent_depth: int = 1, max_context_tokens: int | None = None) -> None:
        if parent_depth not in (0, 1, 2, 3):
            raise ConfigError(
                f"expander.parent_depth={parent_depth} is not valid; choose 0 (sentence), 1 (paragraph), "
                "2 (section) or 3 (document)"
            )
        if max_context_tokens is not None and max_context_tokens < 1:
            raise ConfigError(f"expander.max_context_tokens must be >= 1 or null, got {max_context_tokens}")
        self.parent_depth = parent_depth
        self.max_context_tokens = max_context_tokens

    def expand(self, hits: Sequence[Hit], tree: ChunkTree) -> list[Context]:
        """Contexts in order of their best hit."""
        level = Level(self.parent_depth)
        order: list[str] = []
        triggers: dict[str, list[str]] = {}
        for hit in sorted(hits, key=lambda h: h.rank):
            target = tree.ancestor(hit.chunk_id, level)
            if target.chunk_id not in triggers:
                order.append(target.chunk_id)
                triggers[target.chunk_id] = []
            triggers[target.chunk_id].append(hit.chunk_id)
        contexts: list[Context] = []
        budget = self.max_context_tokens
        for cid in order:
            chunk = tree[cid]
            text, truncated = chunk.text, False
            if budget is not None:
                if budget <= 0:
                    break
                if count_tokens(text) > budget:
                    text = self._cut(tree, cid, budget, words_ok=not contexts)
                    truncated = True
                    if not text:
                        break
                budget -= count_tokens(text)
            contexts.append(Context(
                chunk_id=cid, text=text, title=" > ".join(chunk.heading), level=chunk.level,
                hit_ids=tuple(triggers[cid]), truncated=truncated,
            ))
            if truncated:
                break
        return contexts

    @staticmethod
    def _cut(tree: ChunkTree, chunk_id: str, budget: int, *, words_ok: bool) -> str:
        """The longest run of whole sentences from the start of the chunk that fits ``budget``; when
        not even one fits, the first context (``words_ok``) is cut at a word boundary instead."""
        kept: list[str] = []
        used = 0
        for sentence in tree.descendants(chunk_id, Level.SENTENCE):
            n = count_tokens(sentence.text)
            if used + n > budget:
                break
            kept.append(sentence.text)
            used += n
        if not kept:
            return " ".join(tree[chunk_id].text.split()[:budget]) if words_ok else ""
        return " ".join(kept)
