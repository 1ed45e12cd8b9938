"""Hydra config root shipped inside the package (conf/ at the repo top is a link here)."""
