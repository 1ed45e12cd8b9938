"""Fixtures for tests that talk to the loopback OpenAI-compatible server through litellm."""

from __future__ import annotations

import pytest

from tests.fixtures.llm_server import LLMServer


@pytest.fixture(scope="session")
def llm_server_session():
    """One fixture server for the session (starting one per test is cheap, but ports churn)."""
    with LLMServer() as server:
        yield server


@pytest.fixture()
def llm_server(llm_server_session):
    """The session server with an empty script, default replies and zeroed counters."""
    from tests.fixtures.llm_server import default_reply

    llm_server_session.reset()
    llm_server_session.delay_s = 0.0
    llm_server_session.responder = default_reply
    yield llm_server_session
    llm_server_session.reset()


@pytest.fixture()
def cache_dir(tmp_path):
    """A fresh cache store directory (LLM replies go to its llm/ records)."""
    return tmp_path / "llm-cache"
