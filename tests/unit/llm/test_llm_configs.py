"""The shipped llm / judge / embedder options compose, resolve and build, and hold no key."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from ragbench.embed.api import APIEmbedder
from ragbench.errors import ConfigError
from ragbench.generate.llm import LLMGenerator
from ragbench.judge.build import build_judges
from ragbench.judge.llm import LLMJudge
from ragbench.tracking.mlflow_sink import flatten
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
    assert gen.prompt.name == "default" and gen.max_concurrency == (cfg.llm.max_concurrency or 8)  # null: 8 until
    assert gen.client.auto_concurrency == (cfg.llm.max_concurrency is None)  # the preflight asks the server
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
    judge = build_judges(cfg.judge, instantiate)["llm"]
    assert isinstance(judge, LLMJudge)
    assert judge.repeats == 3 and judge.metrics == ("accuracy", "faithfulness") and judge.dataset == "locomo"
    assert judge.log_tags()["judge.same_model"] == "false"


def test_same_model_judge_fails_until_allowed(tmp_path):
    same = ["llm=openai", "judge=[lexical,llm]", "judge.model=openai/gpt-4o-mini"]
    with pytest.raises(ConfigError, match="allow_same_model"):  # the judge's own line, not Hydra's wrapper
        build_judges(compose_cfg(same, tmp_path).judge, instantiate)
    judge = build_judges(compose_cfg([*same, "judge.allow_same_model=true"], tmp_path).judge, instantiate)["llm"]
    assert judge.same_model


def test_judge_with_the_offline_generator_resolves(tmp_path):
    cfg = compose_cfg(["judge=[lexical,llm]"], tmp_path)  # llm=extractive has model: extractive-baseline
    assert cfg.judge.judges.llm.generator_model == "extractive-baseline"


def test_api_embedder_option(tmp_path):
    cfg = compose_cfg(["embedder=api", "embedder.dimensions=256"], tmp_path)
    emb = instantiate(cfg.embedder)
    assert isinstance(emb, APIEmbedder) and emb.dim == 256  # given dimensions: no probe call
    assert emb.identity.startswith("litellm:openai/text-embedding-3-small|dims=256")


JUDGE_WIDE = {"model": "openai/gpt-4o-mini", "api_base": None, "api_key_env": "OPENAI_API_KEY", "temperature": 0.0,
              "max_tokens": 256, "timeout": 60, "num_retries": 3, "backoff_s": 1.0, "max_concurrency": 8,
              "max_reply_chars": 100000, "max_consecutive_failures": 5, "rubrics": "default",
              "metrics": ["accuracy", "correctness", "faithfulness", "relevance"], "repeats": 1, "pass_threshold": 3,
              "allow_same_model": False}


def test_judge_model_from_the_command_line_reaches_the_judge(tmp_path):
    cfg = compose_cfg(["llm=openai_compatible", "judge=[lexical,llm]", "judge.model=openai/x", "judge.repeats=2"],
                      tmp_path)
    judges = build_judges(cfg.judge, instantiate)
    assert judges["llm"].model == "openai/x" and judges["llm"].client.model == "openai/x"
    assert judges["llm"].repeats == 2 and "llm-judge:openai/x(" in judges["llm"].identity
    assert type(judges["lexical"]).__name__ == "LexicalJudge"  # takes none of the judge-wide keys


def test_every_judge_value_is_logged_and_hashed_once(tmp_path):
    cfg = compose_cfg(["llm=openai_compatible", "judge=[lexical,llm]"], tmp_path)
    params = flatten(OmegaConf.to_container(cfg.judge, resolve=True), "judge.")
    for key in JUDGE_WIDE:
        assert [k for k in params if k.rsplit(".", 1)[-1] == key] == [f"judge.{key}"]
    assert set(cfg.judge.judges.llm) == {"_target_", "dataset", "generator_model"}


def test_the_judge_identity_is_what_the_mirrored_config_gave(tmp_path):
    """Same settings, same verdict cache key as when judges.llm mirrored every judge-wide key."""
    cfg = compose_cfg(["llm=openai_compatible", "judge=[lexical,llm]"], tmp_path)
    now = build_judges(cfg.judge, instantiate)["llm"]
    mirrored = LLMJudge(**JUDGE_WIDE, dataset="locomo", generator_model="openai/local-model")
    assert now.identity == mirrored.identity
    assert now.identity == ("llm-judge:openai/gpt-4o-mini(rubrics=" + mirrored.rubrics.hash + ",metrics=accuracy,"
                            "correctness,faithfulness,relevance,repeats=1,temperature=0.0,max_tokens=256,"
                            "pass_threshold=3,dataset=locomo)")


def test_a_retired_cache_key_names_cache_mode():
    from ragbench.config_check import check_overrides

    with pytest.raises(ConfigError, match=r"^llm.use_cache was removed: the LLM reply cache follows cache.mode"):
        check_overrides(["llm=openai", "llm.use_cache=false"])


def test_a_judge_wide_key_no_judge_takes_is_refused():
    node = OmegaConf.create({"modle": "x", "judges": {"lexical": {"_target_": "ragbench.judge.lexical.LexicalJudge"}}})
    with pytest.raises(ConfigError, match=r"judge.modle is not a setting of any chosen judge \(lexical\)"):
        build_judges(node, instantiate)
