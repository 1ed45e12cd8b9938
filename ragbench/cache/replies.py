"""The job's store for LLM replies that have no stage record of their own (query transforms, API
embeddings, evalgen): whoever builds a job's components from the config opens it around the build
(``with reply_store(cache): ...``), and each LLMClient built inside takes it. Outside (a client built
by hand) there is none unless one is passed: nothing is cached."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ragbench.cache.store import StageCache

_STORE: ContextVar[StageCache | None] = ContextVar("ragbench_reply_store", default=None)


@contextmanager
def reply_store(store: StageCache | None) -> Iterator[StageCache | None]:
    """Components built inside this block keep their LLM replies in ``store`` (None: nowhere)."""
    token = _STORE.set(store)
    try:
        yield store
    finally:
        _STORE.reset(token)


def job_store() -> StageCache | None:
    """The store opened by the enclosing :func:`reply_store`, or None."""
    return _STORE.get()
