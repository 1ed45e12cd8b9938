"""SIGINT and SIGTERM as a flag, acted on at safe points: between cases, between stages, between jobs.

The first signal sets the flag and says so; the work stops at the next safe point (``check()`` raises
``Interrupted``), so no write to the MLflow store, the stage cache or a case record is ever cut in half,
and every open run ends KILLED on the way out. A second signal stops at once (``Interrupted`` raised
wherever the main thread is): the way out for a stage that reaches no safe point soon enough.

The flag is the session's (``ragbench.session.Signals``): ``__main__`` begins the session and installs the
handlers before Hydra starts. Only the standard library and ragbench's leaves are imported.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

from ragbench import session

NOTICE = "ragbench: stopping at the next safe point (between cases, stages or jobs); press Ctrl-C again to stop now"


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM (what ``timeout``, CI runners and SLURM send): unwinds like Ctrl-C, so every
    open run ends KILLED on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _handler(signum: int, frame: FrameType | None) -> None:
    signals = session.current().signals
    if signals.requested is not None:  # the second signal: now
        raise Interrupted(signum)
    signals.requested = signum
    print(NOTICE, file=sys.stderr, flush=True)


def install() -> None:
    """SIGINT and SIGTERM set the flag (main thread only: Python allows handlers nowhere else)."""
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _handler)


def check() -> None:
    """A safe point: raises ``Interrupted`` once a signal has arrived."""
    requested = session.current().signals.requested
    if requested is not None:
        raise Interrupted(requested)


def requested() -> int | None:
    """The signal that asked the process to stop, or None."""
    return session.current().signals.requested


def ignore() -> None:
    """No further signal cuts the closing short (once the first one reached the top)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def reset() -> None:
    """Forgets a signal (tests; a process that handled it and goes on)."""
    session.current().signals.requested = None


__all__ = ["Interrupted", "check", "ignore", "install", "requested", "reset"]
