"""``python -m ragbench.cache info|prune``."""

from ragbench.cache.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
