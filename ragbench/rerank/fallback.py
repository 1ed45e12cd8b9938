"""Reranker fallback: a reranker that cannot score one case (a model error, an API failure) keeps the
order it was given, as EasyRAG's two-stage chain keeps the fused order when its reranker API fails.

The fallback is recorded in the case's trace (``rerank_fallback``: the reranker and the error) and
counted by the job (``rerank/fallbacks``, said in the summary). A reranker that cannot load at all
fails the job once, up front (``ragbench.outcome.preflight``), unless its ``on_load_error`` is
``fallback`` (``OnLoadError``): then its preflight warns once and every case keeps the order it was
given, recorded and counted the same way. Hits are cut to ``k`` as the reranker would have cut them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ragbench.errors import CacheCorruptError, ConfigError, ModelLoadError
from ragbench.protocols import Reranker
from ragbench.types import Hit, Query

log = logging.getLogger(__name__)

FALLBACK_KEY = "rerank_fallback"
ON_LOAD_ERROR = ("fail", "fallback")


class RerankerSkipped(ModelLoadError):
    """Raised for every case by a reranker skipped at preflight (``on_load_error: fallback``)."""


class OnLoadError:
    """For a reranker that loads a model in ``_load()``: ``on_load_error`` decides its preflight on a
    ModelLoadError: ``fail`` re-raises (the job fails once, up front); ``fallback`` warns once, naming
    the model, and the reranker is skipped (``skipped_check()`` raises RerankerSkipped in every case)."""

    model: str
    on_load_error: str = "fail"
    _skipped: str | None = None

    def _load(self) -> Any:
        raise NotImplementedError

    def set_on_load_error(self, key: str, value: str) -> None:
        if value not in ON_LOAD_ERROR:
            raise ConfigError(f"{key}={value!r} is not valid; choose one of {list(ON_LOAD_ERROR)} (fail: a reranker "
                              "that cannot load fails the job up front; fallback: it is skipped, cases keep their order)")
        self.on_load_error = value

    def preflight(self) -> None:
        """Loads the weights before the case loop, under ``on_load_error``."""
        try:
            self._load()
        except ModelLoadError as err:
            if self.on_load_error != "fallback":
                raise
            name = type(self).__name__
            log.warning("%s skipped: could not load '%s' (on_load_error=fallback); every case keeps the order it "
                        "was given (rerank/fallbacks): %s", name, self.model, str(err)[:300])
            self._skipped = f"{name} skipped: could not load '{self.model}' (on_load_error=fallback)"

    def skipped_check(self) -> None:
        if self._skipped is not None:
            raise RerankerSkipped(self._skipped)


def rerank_or_keep(reranker: Reranker, query: Query, hits: Sequence[Hit], trace: dict[str, Any], *,
                   k: int, **kwargs: Any) -> list[Hit]:
    """``reranker.rerank(...)``; on an error, the incoming order (top ``k``) and a note in ``trace``."""
    try:
        return reranker.rerank(query, hits, k=k, **kwargs)
    except CacheCorruptError:
        raise
    except Exception as exc:  # noqa: BLE001 - the case keeps the fused order; recorded and counted
        name = type(reranker).__name__
        if not isinstance(exc, RerankerSkipped):  # skipped: said once, at preflight
            log.warning("case %s: %s could not score (%s: %s); kept the order it was given",
                        query.qid, name, type(exc).__name__, str(exc)[:200])
        trace.setdefault(FALLBACK_KEY, []).append({"reranker": name, "error": f"{type(exc).__name__}: {exc}"[:300]})
        return [Hit(chunk_id=h.chunk_id, score=h.score, rank=r) for r, h in enumerate(hits[:k], start=1)]


def fallback_count(traces: Sequence[Any]) -> int:
    """Cases in which at least one reranker fell back."""
    return sum(1 for tr in traces if tr and tr.get(FALLBACK_KEY))
