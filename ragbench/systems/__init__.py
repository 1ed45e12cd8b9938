"""Evaluate any RAG system: recorded outputs (``system=responses``), a Python callable (``system=python``) or an
HTTP service (``system=http``), scored by ragbench's own metrics, judges, compare and verify."""
