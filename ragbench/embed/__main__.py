"""``python -m ragbench.embed prepare``: see ragbench.embed.prepare."""

from ragbench.embed.prepare import main

if __name__ == "__main__":
    raise SystemExit(main())
