"""``python -m ragbench.cache info|prune``."""

from ragbench import session
from ragbench.cache.cli import main

if __name__ == "__main__":
    session.begin()  # the process's run state (ragbench.session)
    raise SystemExit(main())
