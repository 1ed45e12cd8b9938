"""ragbench.tracking."""
