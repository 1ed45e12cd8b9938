"""The shipped llm / judge / embedder options compose, resolve and build, and hold no key."""

from __future__ import annotations

import pytest
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from ragbench.embed.api import APIEmbedder
from ragbench.errors import ConfigError
from ragbench.generate.llm import LLMGenerator
from ragbench.judge.llm import LLMJudge
from tests.fixtures.jobs import compose_cfg

KEYS = {"OPENAI_API_KEY": "sk-cfg-openai-1111", "ANTHROPIC_API_KEY": "sk-cfg-anthropic-2222"}


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize(
    "option,model",
    [
        ("openai", "openai/gpt-4o-mini"),
        ("anthropic", "anthropic/claude-3-5-haiku-20241022"),
        ("ollama", "ollama/llama3.1"),
        ("openai_compatible", "openai/local-model"),
    ],
)
def test_llm_options_build_a_generator(tmp_path, option, model):
    cfg = compose_cfg([f"llm={option}", "dataset=qasper"], tmp_path)
    gen = instantiate(cfg.llm)
    assert isinstance(gen, LLMGenerator) and gen.model == model and gen.dataset == "qasper"
    assert gen.prompt.name == "default" and gen.max_concurrency == cfg.llm.max_concurrency
    text = OmegaConf.to_yaml(cfg)
    assert all(value not in text for value in KEYS.values())  # only variable names are in the config


def test_judge_llm_composes_with_lexical_and_sees_the_generator(tmp_path):
    cfg = compose_cfg(
        [
            "llm=openai_compatible",
            "judge=[lexical,llm]",
            "judge.repeats=3",
            "judge.metrics=[accuracy,faithfulness]",
        ],
        tmp_path,
    )
    assert set(cfg.judge.judges) == {"lexical", "llm"}
    judge = instantiate(cfg.judge.judges.llm)
    assert isinstance(judge, LLMJudge)
    assert judge.repeats == 3 and judge.metrics == ("accuracy", "faithfulness") and judge.dataset == "locomo"
    assert judge.log_tags()["judge.same_model"] == "false"


def test_same_model_judge_fails_until_allowed(tmp_path):
    same = ["llm=openai", "judge=[lexical,llm]", "judge.model=openai/gpt-4o-mini"]
    with pytest.raises(InstantiationException, match="allow_same_model") as info:
        instantiate(compose_cfg(same, tmp_path).judge.judges.llm)
    assert isinstance(info.value.__cause__, ConfigError)
    judge = instantiate(compose_cfg([*same, "judge.allow_same_model=true"], tmp_path).judge.judges.llm)
    assert judge.same_model


def test_judge_with_the_offline_generator_resolves(tmp_path):
    cfg = compose_cfg(["judge=[lexical,llm]"], tmp_path)  # llm=extractive has model: extractive-baseline
    assert cfg.judge.judges.llm.generator_model == "extractive-baseline"


def test_api_embedder_option(tmp_path):
    cfg = compose_cfg(["embedder=api", "embedder.dimensions=256"], tmp_path)
    emb = instantiate(cfg.embedder)
    assert isinstance(emb, APIEmbedder) and emb.dim == 256  # given dimensions: no probe call
    assert emb.identity.startswith("litellm:openai/text-embedding-3-small|dims=256")
