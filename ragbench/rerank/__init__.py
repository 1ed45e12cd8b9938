"""ragbench.rerank."""
