"""Baselines that separate the retriever's effect from the generator's (as BERGEN offers).

- ``retrieval=none`` (:class:`ClosedBook`): no context; the generator answers from its own knowledge.
- ``retrieval=oracle`` (:class:`Oracle`): the gold evidence units matched in the corpus are the hits
  (every matched item, in evidence order), then go through the same expander and prompt as real hits.

Both are tagged ``ragbench.baseline`` and labelled in the sweep table; neither builds an index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragbench.evidence import EvidenceMap
from ragbench.protocols import BaselineRetriever
from ragbench.types import Hit


class _Baseline:
    needs_vectors = False
    baseline = ""

    def build(self, *, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray | None) -> None:
        return None

    def search(self, *, texts: Sequence[str], vectors: np.ndarray | None, k: int) -> list[list[Hit]]:
        return [[] for _ in texts]

    def params(self) -> Mapping[str, Any]:
        return {"baseline": self.baseline}

    def hits_for(self, emap: EvidenceMap) -> list[Hit]:
        return []


class ClosedBook(_Baseline):
    """``retrieval=none``: every query gets no hit and no context."""

    baseline = "closed_book"


class Oracle(_Baseline):
    """``retrieval=oracle``: the anchors of the query's matched evidence, as hits ranked in evidence order."""

    baseline = "oracle"

    def hits_for(self, emap: EvidenceMap) -> list[Hit]:
        ids = list(dict.fromkeys(a for anchors in emap.anchors for a in anchors))
        return [Hit(chunk_id=cid, score=1.0, rank=r) for r, cid in enumerate(ids, start=1)]


def baseline_of(retriever: Any) -> str | None:
    """``closed_book`` / ``oracle`` for a baseline retriever, else None (a real retriever)."""
    return (retriever.baseline or None) if isinstance(retriever, BaselineRetriever) else None
