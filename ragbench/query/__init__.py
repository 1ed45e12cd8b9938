"""The query side of retrieval: what is searched for each question (``query=none|rules|multi_query|hyde``)
and how the rankings of several searched texts are fused back into one (``ragbench.query.plan``)."""
