"""``plan=true``: what a sweep will cost, before it runs (ragbench.plan.cli)."""
