"""ragbench.embed."""
