"""ragbench.llm."""
