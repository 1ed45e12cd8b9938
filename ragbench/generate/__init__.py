"""ragbench.generate."""
