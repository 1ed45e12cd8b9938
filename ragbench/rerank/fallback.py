"""Reranker fallback: a reranker that cannot score one case (a model error, an API failure) keeps the
order it was given, as EasyRAG's two-stage chain keeps the fused order when its reranker API fails.

The fallback is recorded in the case's trace (``rerank_fallback``: the reranker and the error) and
counted by the job (``rerank/fallbacks``, said in the summary). A reranker that cannot load at all
still fails the job once, up front (``ragbench.outcome.preflight``). Hits are cut to ``k`` as the
reranker would have cut them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ragbench.errors import CacheCorruptError
from ragbench.protocols import Reranker
from ragbench.types import Hit, Query

log = logging.getLogger(__name__)

FALLBACK_KEY = "rerank_fallback"


def rerank_or_keep(reranker: Reranker, query: Query, hits: Sequence[Hit], trace: dict[str, Any], *,
                   k: int, **kwargs: Any) -> list[Hit]:
    """``reranker.rerank(...)``; on an error, the incoming order (top ``k``) and a note in ``trace``."""
    try:
        return reranker.rerank(query, hits, k=k, **kwargs)
    except CacheCorruptError:
        raise
    except Exception as exc:  # noqa: BLE001 - the case keeps the fused order; recorded and counted
        name = type(reranker).__name__
        log.warning("case %s: %s could not score (%s: %s); kept the order it was given",
                    query.qid, name, type(exc).__name__, str(exc)[:200])
        trace.setdefault(FALLBACK_KEY, []).append({"reranker": name, "error": f"{type(exc).__name__}: {exc}"[:300]})
        return [Hit(chunk_id=h.chunk_id, score=h.score, rank=r) for r, h in enumerate(hits[:k], start=1)]


def fallback_count(traces: Sequence[Any]) -> int:
    """Cases in which at least one reranker fell back."""
    return sum(1 for tr in traces if tr and tr.get(FALLBACK_KEY))
