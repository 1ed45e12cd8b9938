"""ragbench.retrieval."""
