"""Small-to-big context expansion: hits climb to a target level, merge per parent, fit a token budget."""

from __future__ import annotations

from collections.abc import Sequence

from ragbench.errors import ConfigError
from ragbench.types import Chunk, ChunkTree, Context, Hit, Level


def count_tokens(text: str) -> int:
    """Whitespace-token count: the unit of context budgets and per-1k-token figures."""
    return len(text.split())


class ParentExpander:
    """``parent_depth`` climbs up to the target level; ``child_depth`` aggregates back down from it.

    ``parent_depth`` is the target level (0 sentence, 1 paragraph, 2 section, 3 document), never
    exceeded: a hit below it climbs to its ancestor at that level; a hit at or above it stays as it
    is. Hits sharing a target merge into one context that keeps every triggering hit id, ordered by
    its best hit.

    ``child_depth`` says how the context is aggregated from the target's children. 0 keeps the whole
    target. ``c`` > 0 builds the context from the target's descendants ``c`` levels down (never below
    a sentence), keeping only those that hold a hit, in document order and under their headings: a
    section target with ``child_depth=1`` holds the section title and just the paragraphs that were
    hit. A hit at or above that level keeps its whole text. The context's ``part_ids`` name the parts.

    ``max_context_chars`` caps each context first: a longer one keeps its first ``max_context_chars``
    characters, as the benchmark suite cuts each block (at 8,000), and is marked truncated.
    ``max_context_tokens`` caps the total: the last context is cut at a sentence boundary and marked
    truncated; later ones are dropped. The job counts the contexts cut (``expand/truncated_contexts``).
    """

    def __init__(self, *, parent_depth: int = 1, child_depth: int = 0,
                 max_context_tokens: int | None = None, max_context_chars: int | None = None) -> None:
        if parent_depth not in (0, 1, 2, 3):
            raise ConfigError(
                f"expander.parent_depth={parent_depth} is not valid; choose 0 (sentence), 1 (paragraph), "
                "2 (section) or 3 (document)"
            )
        if not isinstance(child_depth, int) or child_depth < 0:
            raise ConfigError(
                f"expander.child_depth={child_depth!r} is not valid; choose 0 (the whole target) or a "
                "positive number of levels below the target (1, 2, 3)"
            )
        if max_context_tokens is not None and max_context_tokens < 1:
            raise ConfigError(f"expander.max_context_tokens must be >= 1 or null, got {max_context_tokens}")
        if max_context_chars is not None and (isinstance(max_context_chars, bool) or not isinstance(
                max_context_chars, int) or max_context_chars < 1):
            raise ConfigError(f"expander.max_context_chars must be an integer >= 1 or null (no cap; the "
                              f"benchmark suite uses 8000), got {max_context_chars!r}")
        self.max_context_chars = max_context_chars
        self.parent_depth = parent_depth
        self.child_depth = child_depth
        self.max_context_tokens = max_context_tokens

    @property
    def unit_level(self) -> Level:
        """The level of the parts a context is built from (the target level when child_depth=0)."""
        return Level(max(self.parent_depth - self.child_depth, 0))

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
            parts = self._parts(tree, chunk, triggers[cid])
            whole = parts == (cid,)
            text = chunk.text if whole else _render(tree, chunk, set(parts), _on_paths(tree, cid, parts))
            truncated = False
            if self.max_context_chars is not None and len(text) > self.max_context_chars:
                text, truncated = text[: self.max_context_chars], True
            if budget is not None:
                if budget <= 0:
                    break
                if count_tokens(text) > budget:
                    text = self._cut(tree, parts, budget, words_ok=not contexts, whole=text)
                    text = text if self.max_context_chars is None else text[: self.max_context_chars]
                    truncated = True
                    if not text:
                        break
                    budget = 0
                budget -= count_tokens(text)
            contexts.append(Context(
                chunk_id=cid, text=text, title=" > ".join(chunk.heading), level=chunk.level,
                hit_ids=tuple(triggers[cid]), truncated=truncated,
                part_ids=() if whole else parts,
            ))
            if budget is not None and budget <= 0:
                break
        return contexts

    def _parts(self, tree: ChunkTree, target: Chunk, hit_ids: Sequence[str]) -> tuple[str, ...]:
        """The chunks under ``target`` the context holds, in document order: the target itself when
        child_depth is 0 or a hit sits at or above the unit level over the whole target."""
        unit = self.unit_level
        if unit >= target.level:
            return (target.chunk_id,)
        wanted = {tree.ancestor(h, unit).chunk_id for h in hit_ids}
        if target.chunk_id in wanted:
            return (target.chunk_id,)
        return tuple(c.chunk_id for c in _in_order(tree, target, wanted))

    @staticmethod
    def _cut(tree: ChunkTree, parts: Sequence[str], budget: int, *, words_ok: bool, whole: str) -> str:
        """The longest run of whole sentences from the start of the parts that fits ``budget``; when
        not even one fits, the first context (``words_ok``) is cut at a word boundary instead."""
        kept: list[str] = []
        used = 0
        for sentence in (s for p in parts for s in tree.descendants(p, Level.SENTENCE)):
            n = count_tokens(sentence.text)
            if used + n > budget:
                break
            kept.append(sentence.text)
            used += n
        if not kept:
            return " ".join(whole.split()[:budget]) if words_ok else ""
        return " ".join(kept)


def _in_order(tree: ChunkTree, node: Chunk, wanted: set[str]) -> list[Chunk]:
    """The ``wanted`` chunks under ``node``, in document order (a wanted chunk's own subtree is not
    searched further)."""
    if node.chunk_id in wanted:
        return [node]
    out: list[Chunk] = []
    for child in node.children:
        out.extend(_in_order(tree, tree[child], wanted))
    return out


def _on_paths(tree: ChunkTree, target_id: str, parts: Sequence[str]) -> set[str]:
    """Every chunk on the way from the target down to one of the parts."""
    keep: set[str] = set()
    for part in parts:
        for cid in tree.lineage(part):
            keep.add(cid)
            if cid == target_id:
                break
    return keep


def _render(tree: ChunkTree, node: Chunk, parts: set[str], keep: set[str]) -> str:
    """The node's text restricted to ``parts``, laid out as the hierarchical chunker lays out a whole
    node: sentences joined by spaces, paragraphs by lines under the section title, sections by blank
    lines under the document title. With every child kept this equals the node's own text."""
    if node.chunk_id in parts:
        return node.text
    inner = [_render(tree, tree[c], parts, keep) for c in node.children if c in keep]
    if node.level == Level.PARAGRAPH:
        return " ".join(inner)
    if node.level == Level.SECTION:
        return f"{node.heading[-1] if node.heading else ''}\n" + "\n".join(inner)
    return "\n\n".join([node.heading[0] if node.heading else "", *inner])
