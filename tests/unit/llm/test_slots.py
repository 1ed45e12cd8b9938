"""llm.max_concurrency: null follows what the endpoint serves (ragbench.llm.slots), a number is kept."""

from __future__ import annotations

import pytest

from ragbench.llm.slots import DEFAULT, LOCAL, endpoint_concurrency, props_url


@pytest.mark.parametrize(("base", "url"), [
    ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/props"),
    ("http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080/props"),
    ("http://gpu-box:8000", "http://gpu-box:8000/props"),
])
def test_props_sits_at_the_servers_root(base, url):
    assert props_url(base) == url


def test_null_takes_the_servers_slots_else_the_default():
    asked = []

    def probe(base, **kw):
        asked.append(base)
        return {"http://llama:8080/v1": 4}.get(base)

    assert endpoint_concurrency("http://llama:8080/v1", None, probe=probe) == 4  # llama.cpp: total_slots
    assert endpoint_concurrency("http://vllm:8000/v1", None, probe=probe) == DEFAULT  # says nothing
    assert endpoint_concurrency(None, None, probe=probe) == DEFAULT  # a provider: never probed
    assert endpoint_concurrency(None, None, fallback=LOCAL, probe=probe) == 1  # an in-process model
    assert endpoint_concurrency("http://llama:8080/v1", 2, probe=probe) == 2  # a number is used as given
    assert asked == ["http://llama:8080/v1", "http://vllm:8000/v1"]
