"""``python -m ragbench.compare``: the comparison command (``ragbench.compare.cli``)."""

import sys

from ragbench import session
from ragbench.compare.cli import main

if __name__ == "__main__":
    session.begin()  # the process's run state (ragbench.session)
    sys.exit(main())
