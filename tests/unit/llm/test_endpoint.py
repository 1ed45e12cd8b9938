"""One LLMEndpoint: its settings are written once (conf/_endpoint), checked once (one line naming the key),
built once for the judges, and taken by the generator, the judges, the query transforms, the systems, the
API embedder and datasets generate."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from ragbench.build import instantiate_node
from ragbench.config_check import CONF, check_overrides
from ragbench.datasets.evalgen.cli import client as generate_client
from ragbench.embed.api import APIEmbedder
from ragbench.errors import ConfigError
from ragbench.generate.llm import LLMGenerator
from ragbench.judge.build import build_judges
from ragbench.llm.endpoint import SETTINGS, LLMEndpoint
from ragbench.query.options import query_options
from ragbench.systems.http_system import HttpSystem
from ragbench.systems.python_system import PythonSystem
from tests.fixtures.jobs import compose_cfg

SHARED = OmegaConf.to_container(OmegaConf.load(CONF / "_endpoint" / "llm.yaml"))


def answer(question: str) -> dict[str, Any]:  # system.target for PythonSystem
    return {"answer": question, "contexts": []}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-endpoint-test-1234")


def _endpoint_keys(node: Any) -> set[str]:
    return set(node) & set(SETTINGS) if isinstance(node, dict) else set()


def _nodes(node: Any, at: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every mapping in a YAML file, with its dotted place."""
    if not isinstance(node, dict):
        return []
    found = [(at, node)]
    for key, value in node.items():
        found += _nodes(value, f"{at}.{key}" if at else str(key))
    return found


def test_no_config_file_copies_the_endpoint_block() -> None:
    """The endpoint's settings are written in conf/_endpoint only: an option sets the few it changes (ollama:
    six), a node that is no LLM endpoint has its own few (an API embedder, a system's call bounds)."""
    copies = []
    for path in sorted(CONF.rglob("*.yaml")):
        if path.parent.name == "_endpoint":
            continue
        for at, node in _nodes(OmegaConf.to_container(OmegaConf.load(path))):
            if len(_endpoint_keys(node)) > len(SETTINGS) // 2:
                copies.append(f"{path.relative_to(CONF)}:{at or '<top>'}")
    assert copies == []


@pytest.mark.parametrize(("overrides", "node"), [
    (["llm=openai"], "llm"), (["llm=anthropic"], "llm"), (["llm=openai_compatible"], "llm"),
    (["judge=[lexical,llm]"], "judge"), (["judge=[claims]"], "judge"), (["judge=[reference_free]"], "judge"),
    (["query=multi_query"], "query.transform.client"), (["query=hyde"], "query.transform.client"),
])
def test_every_llm_node_has_the_shared_endpoint_keys_flat(tmp_path: Path, overrides: list[str], node: str) -> None:
    cfg = compose_cfg(overrides, tmp_path)
    keys = set(OmegaConf.select(cfg, node))
    assert set(SETTINGS) <= keys  # flat: llm.timeout, judge.timeout, query.transform.client.timeout
    assert OmegaConf.select(cfg, f"{node}.num_retries") == SHARED["num_retries"]


def test_flat_overrides_reach_the_built_components(tmp_path: Path) -> None:
    cfg = compose_cfg(["llm=openai", "llm.timeout=7", "judge=[lexical,llm,claims,reference_free]",
                       "judge.model=openai/judge-x", "judge.num_retries=1", "query=multi_query",
                       "query.transform.client.backoff_s=0.5"], tmp_path)
    generator = instantiate_node(cfg.llm)
    assert generator.endpoint.timeout == 7 and generator.client.timeout == 7.0
    judges = build_judges(cfg.judge, instantiate_node)
    shared = judges["llm"].endpoint
    assert shared.model == "openai/judge-x" and shared.num_retries == 1 and shared.role == "judge"
    # built once: the claim judge's endpoint is the shared one with its own max_tokens over it
    assert judges["claims"].endpoint == dataclasses.replace(shared, max_tokens=512)
    assert judges["reference_free"].endpoint == dataclasses.replace(shared, max_tokens=512)
    assert judges["claims"].client.retry.num_retries == 1
    transform = query_options(cfg, instantiate_node)["query"]
    assert transform.client.role == "query.transform.client" and transform.client.retry.backoff_s == 0.5


@pytest.mark.parametrize(("settings", "line"), [
    ({"timeout": 0}, "llm.timeout must be a number of seconds > 0, got 0"),
    ({"timeout": float("inf")}, "llm.timeout must be a number of seconds > 0, got inf"),
    ({"max_concurrency": 0}, "llm.max_concurrency must be >= 1, got 0"),
    ({"max_reply_chars": 0}, "llm.max_reply_chars must be an integer >= 1, got 0"),
    ({"batch": "yes"}, "llm.batch must be true or false, got 'yes'"),
    ({"timout": 5}, "llm.timout is not a setting of an LLM endpoint; did you mean llm.timeout?"),
])
def test_a_bad_setting_is_one_line_naming_the_key(settings: dict[str, Any], line: str) -> None:
    with pytest.raises(ConfigError) as info:
        LLMGenerator(model="openai/x", **settings)
    assert str(info.value) == line


def test_a_judge_setting_is_named_under_judge(tmp_path: Path) -> None:
    cfg = compose_cfg(["judge=[lexical,claims]", "judge.max_reply_chars=0"], tmp_path)
    with pytest.raises(ConfigError, match=r"^judge\.max_reply_chars must be an integer >= 1, got 0$"):
        build_judges(cfg.judge, instantiate_node)


def test_the_config_check_knows_the_shared_keys() -> None:
    check_overrides(["llm=openai", "llm.batch_poll_s=5", "query=hyde", "query.transform.client.timeout=5"])
    with pytest.raises(ConfigError, match=r"did you mean judge\.max_tokens\?"):
        check_overrides(["judge=claims", "judge.max_tokenz=5"])


def test_components_take_an_endpoint_object() -> None:
    endpoint = LLMEndpoint(model="openai/x", api_base="http://127.0.0.1:9/v1", timeout=5, num_retries=0)
    generator = LLMGenerator(endpoint=endpoint, max_tokens=64)  # a setting given too wins over the endpoint
    assert generator.endpoint == dataclasses.replace(endpoint, max_tokens=64, role="llm")
    assert generator.client.api_base == "http://127.0.0.1:9/v1" and generator.client.max_tokens == 64
    assert "api_base=http://127.0.0.1:9/v1" in generator.identity
    embedder = APIEmbedder(endpoint=endpoint)
    assert embedder.client.role == "embedder" and embedder.client.max_concurrency == 1
    system = HttpSystem(url="http://127.0.0.1:9/answer", endpoint=LLMEndpoint(timeout=3, num_retries=1))
    assert system.client.timeout == 3.0 and system.client.retry.num_retries == 1
    python = PythonSystem(target=f"{__name__}:answer", timeout=4)
    assert python.client.timeout == 4.0 and python.client.max_concurrency == 4  # a system's own defaults


def test_datasets_generate_builds_its_critic_over_the_generators_endpoint(tmp_path: Path) -> None:
    llm = compose_cfg(["llm=openai", "llm.timeout=9"], tmp_path).llm
    critic = generate_client(llm, role="critic", overrides={"model": "openai/critic", "max_tokens": 100})
    assert critic.endpoint == LLMEndpoint.of("critic", LLMEndpoint.of("llm", None, {
        k: llm[k] for k in SETTINGS}), {"model": "openai/critic", "max_tokens": 100})
    assert critic.timeout == 9.0 and critic.role == "critic"


def test_a_local_model_reads_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """judge.backend=local keeps the judge node's api_key_env (OPENAI_API_KEY): no variable is needed."""
    monkeypatch.delenv("OPENAI_API_KEY")
    assert LLMEndpoint(model="local", api_key_env="OPENAI_API_KEY").model == "local"
    with pytest.raises(ConfigError, match=r"^judge\.api_key_env names the environment variable OPENAI_API_KEY"):
        LLMEndpoint(model="openai/x", role="judge", api_key_env="OPENAI_API_KEY")
