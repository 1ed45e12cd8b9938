"""ragbench.ingest."""
