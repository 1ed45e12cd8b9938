"""ragbench.cache."""
