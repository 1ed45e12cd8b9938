"""Fixtures for the LLM unit tests (the loopback-server tests are in tests/integration/llm)."""

from __future__ import annotations

import pytest


@pytest.fixture()
def cache_dir(tmp_path):
    """A fresh response cache directory."""
    return tmp_path / "llm-cache"
