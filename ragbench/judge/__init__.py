"""ragbench.judge."""
