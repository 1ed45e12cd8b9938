"""Compare runs with confidence: paired statistics, failure taxonomy, report, CI gate (``python -m ragbench.compare``)."""
