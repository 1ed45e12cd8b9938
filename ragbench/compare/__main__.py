"""``python -m ragbench.compare``: the comparison command (``ragbench.compare.cli``)."""

import sys

from ragbench.compare.cli import main

if __name__ == "__main__":
    sys.exit(main())
