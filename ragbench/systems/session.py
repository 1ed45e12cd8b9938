"""A job's outcomes of one system, by qid: the system retriever asks (or reads) each question once; the
system expander and generator of the same job read the outcome, so a question is never asked twice."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

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


_SESSIONS: dict[str, Session] = {}
_LOCK = threading.Lock()


def session(identity: str) -> Session:
    """The session of the system named ``identity`` in this process."""
    with _LOCK:
        return _SESSIONS.setdefault(identity, Session())
