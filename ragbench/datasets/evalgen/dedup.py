"""Near-duplicate questions: cosine similarity of the configured embedder's query vectors, or (with
``dedup.method=lexical``) the Jaccard similarity of the questions' normalised token sets."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ragbench.errors import ConfigError
from ragbench.text import tokens

METHODS = ("embedder", "lexical", "off")
Embed = Callable[[Sequence[str]], np.ndarray]


class Deduplicator:
    """Remembers kept questions; ``near`` names the kept question a new one is too similar to.

    Each question is embedded on its own, so a resumed run asks an embedding API (and its cache) for
    exactly the texts it asked for before.
    """

    def __init__(self, *, method: str, threshold: float, embed: Embed | None = None) -> None:
        if method not in METHODS:
            raise ConfigError(f"dedup.method={method!r} is not valid\n  fix: choose one of {list(METHODS)}")
        if not 0 < threshold <= 1:
            raise ConfigError(f"dedup.threshold must be in (0, 1], got {threshold}\n  fix: e.g. dedup.threshold=0.92")
        if method == "embedder" and embed is None:
            raise ConfigError("dedup.method=embedder needs an embedder\n  fix: set embedder=... or dedup.method=lexical")
        self.method = method
        self.threshold = threshold
        self._embed = embed
        self._ids: list[str] = []
        self._vecs: list[np.ndarray] = []
        self._sets: list[frozenset[str]] = []
        self._last: tuple[str, np.ndarray] | None = None

    def _vector(self, question: str) -> np.ndarray:
        assert self._embed is not None
        if self._last is not None and self._last[0] == question:  # near() then add() of one question
            return self._last[1]
        vec = np.asarray(self._embed([question]), dtype=np.float32)[0]
        vec = vec / max(float(np.linalg.norm(vec)), 1e-12)
        self._last = (question, vec)
        return vec

    def near(self, question: str) -> tuple[str, float] | None:
        """(id, similarity) of the most similar kept question at or above the threshold, else None."""
        if self.method == "off" or not self._ids:
            return None
        if self.method == "embedder":
            sims = np.stack(self._vecs) @ self._vector(question)
        else:
            mine = frozenset(tokens(question))
            sims = np.array([len(mine & s) / (len(mine | s) or 1) for s in self._sets])
        best = int(np.argmax(sims))
        return (self._ids[best], float(sims[best])) if sims[best] >= self.threshold else None

    def add(self, question: str, item_id: str) -> None:
        self._ids.append(item_id)
        if self.method == "embedder":
            self._vecs.append(self._vector(question))
        elif self.method == "lexical":
            self._sets.append(frozenset(tokens(question)))
