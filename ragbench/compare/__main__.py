"""``python -m ragbench.compare``: the comparison command (``ragbench.compare.cli``)."""

import sys

from ragbench import gc_tuning, session
from ragbench.compare.cli import main

if __name__ == "__main__":
    session.begin()  # the process's run state (ragbench.session)
    gc_tuning.for_batch_work()  # as python -m ragbench: the cases read stay alive, so collections rescan them
    sys.exit(main())
