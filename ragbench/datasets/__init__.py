"""ragbench.datasets."""
