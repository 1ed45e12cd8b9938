"""Generating an evaluation set from your own documents: plan, prompts, critic, dedup, journal."""
