"""ragbench: sweep RAG pipelines with Hydra, log every job to MLflow."""

__version__ = "0.1.0"
