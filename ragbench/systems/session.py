"""A job's outcomes of one system, by qid: the system retriever asks (or reads) each question once; the
system expander and generator of the same job read the outcome, so a question is never asked twice."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from ragbench.session import current as current_session
from ragbench.systems.matching import MatchedRecord


@dataclass(frozen=True)
class Outcome:
    """A question's matched record, or the error its call (or lookup) ended with."""

    matched: MatchedRecord | None = None
    error: BaseException | None = None


@dataclass
class Session:
    """One job's outcomes and counters; ``begin`` starts the next job of a sweep afresh."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    counters: Counter[str] = field(default_factory=Counter)
    active: bool = False

    def begin(self) -> None:
        self.outcomes = {}
        self.counters = Counter()
        self.active = True


@dataclass
class _Sessions:
    """Each system's session by identity, kept for the run session's later jobs (``ragbench.session``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    by_identity: dict[str, Session] = field(default_factory=dict)


def session(identity: str) -> Session:
    """The session of the system named ``identity`` in this process's run session."""
    sessions = current_session().caches.slot(__name__, _Sessions)
    with sessions.lock:
        return sessions.by_identity.setdefault(identity, Session())
