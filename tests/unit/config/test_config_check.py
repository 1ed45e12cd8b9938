"""Bad config values and unknown keys: each a one-line ConfigError naming the key, the valid range or
the closest valid key, raised before any component, model or MLflow store is touched."""

from __future__ import annotations

import math

import pytest
from hydra import compose, initialize_config_module

from ragbench.config_check import check_config, check_overrides
from ragbench.errors import ConfigError
from ragbench.validate import number


def composed(overrides: list[str]):
    with initialize_config_module(config_module="ragbench.conf", version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def one_line_error(fn, *args) -> str:
    with pytest.raises(ConfigError) as exc:
        fn(*args)
    text = str(exc.value)
    assert "\n" not in text and "Traceback" not in text
    return text


# (overrides, key named in the error, what the message must say about the valid values)
BAD_VALUES = [
    (["retrieval.topk=nan"], "retrieval.topk=nan", "an integer >= 1"),
    (["retrieval.topk=inf"], "retrieval.topk=inf", "an integer >= 1"),
    (["retrieval.topk=abc"], "retrieval.topk='abc'", "an integer >= 1"),
    (["retrieval.topk=0"], "retrieval.topk=0", "an integer >= 1"),
    (["retrieval.topk=2.5"], "retrieval.topk=2.5", "an integer >= 1"),
    (["retrieval.topk=true"], "retrieval.topk=True", "an integer >= 1"),
    (["retrieval=bm25", "retrieval.retriever.k1=nan"], "retrieval.retriever.k1=nan", ">= 0"),
    (["retrieval=bm25", "retrieval.retriever.k1=-1"], "retrieval.retriever.k1=-1", ">= 0"),
    (["retrieval=bm25", "retrieval.retriever.b=1.5"], "retrieval.retriever.b=1.5", "in [0, 1]"),
    (["retrieval=hybrid", "retrieval.retriever.children.1.k1=inf"], "retrieval.retriever.children.1.k1=inf", ">= 0"),
    (["retrieval=hybrid", "retrieval.retriever.weights=[1.0,nan]"], "retrieval.retriever.weights[1]=nan", ">= 0"),
    (["retrieval=hybrid", "retrieval.retriever.k_rrf=0"], "retrieval.retriever.k_rrf=0", "> 0"),
    (["retrieval=hybrid", "retrieval.retriever.candidates=0"], "retrieval.retriever.candidates=0", ">= 1"),
    (["retrieval.retriever.ef_search=-3"], "retrieval.retriever.ef_search=-3", ">= 1"),
    (["llm=openai", "llm.timeout=inf"], "llm.timeout=inf", "> 0"),
    (["llm=openai", "llm.timeout=0"], "llm.timeout=0", "> 0"),
    (["llm=openai", "llm.temperature=nan"], "llm.temperature=nan", "in [0, 2]"),
    (["llm=openai", "llm.max_tokens=0"], "llm.max_tokens=0", ">= 1"),
    (["llm=openai", "llm.num_retries=-1"], "llm.num_retries=-1", "in [0, 100]"),
    (["llm=openai", "llm.backoff_s=nan"], "llm.backoff_s=nan", "in [0, 3600]"),
    (["llm=openai", "llm.max_concurrency=0"], "llm.max_concurrency=0", ">= 1"),
    (["judge=llm", "judge.temperature=-0.5"], "judge.temperature=-0.5", "in [0, 2]"),
    (["judge=llm", "judge.repeats=0"], "judge.repeats=0", ">= 1"),
    (["dataset.seed=nan"], "dataset.seed=nan", "an integer >= 0"),
    (["dataset.sample_size=0"], "dataset.sample_size=0", ">= 1 or null"),
    (["dataset.num_docs=inf"], "dataset.num_docs=inf", ">= 1 or null"),
    (["expander.parent_depth=7"], "expander.parent_depth=7", "in [0, 3]"),
    (["expander.max_context_tokens=nan"], "expander.max_context_tokens=nan", ">= 1 or null"),
    (["reranker=mmr", "reranker.rerankers.mmr.lambda_=2"], "reranker.rerankers.mmr.lambda_=2", "in [0, 1]"),
    (["reranker=mmr", "reranker.candidates=-1"], "reranker.candidates=-1", ">= 0"),
    (["embedder.batch_size=0"], "embedder.batch_size=0", ">= 1"),
    (["chunker.max_sentence_chars=nan"], "chunker.max_sentence_chars=nan", ">= 1"),
]


@pytest.mark.parametrize(("overrides", "named", "valid"), BAD_VALUES, ids=[" ".join(o) for o, _, _ in BAD_VALUES])
def test_bad_numeric_value_is_one_named_line_with_the_valid_range(overrides, named, valid):
    text = one_line_error(check_config, composed(overrides))
    assert text.startswith(f"{named} is not valid: use ")
    assert valid in text


@pytest.mark.parametrize("overrides", [
    [], ["retrieval=hybrid", "reranker=[mmr,diversity]", "judge=[lexical,llm]", "llm=openai"],
    ["experiment=smoke"], ["dataset=qasper", "dataset.num_docs=2", "retrieval=bm25", "retrieval.retriever.k1=0"],
])
def test_the_shipped_configs_pass(overrides):
    check_config(composed(overrides))


# keys added with + land in a group's own settings, where nothing reads them: refused after composition
@pytest.mark.parametrize(("override", "message"), [
    ("+retrieval.topkk=3", "retrieval.topkk is not a setting of the retrieval group; did you mean retrieval.topk?"),
    ("+reranker.candidate=5", "did you mean reranker.candidates?"),
    ("+judge.repeat=3", "did you mean judge.repeats?"),
])
def test_added_unknown_group_key_suggests_the_close_one(override, message):
    assert message in one_line_error(check_config, composed([override]))


# (command line, what the one line must say): before Hydra composes, instead of its "append with +" advice
BAD_KEYS = [
    (["retrieval.topkk=3"], "retrieval.topkk is not a config key of retrieval=dense; did you mean retrieval.topk?"),
    (["-m", "retrieval.topkk=3,5"], "did you mean retrieval.topk?"),
    (["retrievl=bm25"], "retrievl is not a config key or group; did you mean retrieval?"),
    (["retrieval=bm25", "retrieval.retriever.k2=1"], "did you mean retrieval.retriever.k1?"),
    (["retrieval.retriever.k1=1"], "not a config key of retrieval=dense; valid keys here: ef_construction"),
    (["reranker=[cross_encoder,mmr]", "reranker.rerankers.mmr.lambd=0.3"], "did you mean reranker.rerankers.mmr.lambda_?"),
    (["cache.dirr=x"], "cache.dirr is not a config key; did you mean cache.dir?"),
    (["dataset=qasper", "dataset.splt=dev"], "did you mean dataset.split?"),
    (["retrieval=hybrid", "retrieval.retriever.children.5.k1=1"], "is a list of 2; use an index 0..1"),
    (["retrieval.topk.x=3"], "retrieval.topk is a single value"),
    (["--cfg", "job", "llm.temprature=0.5"], "not a config key of llm=extractive"),
    (["embedder.parent_vectors=mean"], "embedder.parent_vectors has moved: use retrieval.parent_vectors"),
    (["-m", "+embedder.parent_vectors=mean,none"], "embedder.parent_vectors has moved: use retrieval.parent_vectors"),
    # every value of a swept group is an option of it, checked before Hydra composes (45.29)
    (["-m", "dataset=locomo,qasprr"], "qasprr is not an option of dataset (in dataset=locomo,qasprr); "
                                      "did you mean dataset=qasper?"),
    (["-m", "retrieval.topk=3,5", "retrieval=dense,bm52"], "did you mean retrieval=bm25?"),
    (["-m", "dataset=choice(locomo,qasprr)"], "qasprr is not an option of dataset"),
    (["judge=[lexical,llmm]"], "llmm is not an option of judge (in judge=[lexical,llmm]); did you mean judge=llm?"),
    (["-m", "judge=[lexical],[lexical,lmm]"], "lmm is not an option of judge"),
    (["dataset=zzz"], "zzz is not an option of dataset (in dataset=zzz); options: beir, custom, financebench"),
    (["embedder.worker=true"], "embedder.worker was removed with the encoder worker (it cost CPU and saved none); "
                               "fix: drop embedder.worker"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_KEYS, ids=[" ".join(a) for a, _ in BAD_KEYS])
def test_unknown_command_line_key_is_one_line_with_the_closest_keys(argv, message):
    assert message in one_line_error(check_overrides, argv)


@pytest.mark.parametrize("argv", [
    ["-m", "retrieval.topk=3,5,10", "dataset=locomo,qasper"], ["retrieval=hybrid", "retrieval.retriever.children.1.k1=0.9"],
    ["+llm.extra=1"], ["hydra.launcher.n_jobs=2", "hydra/launcher=joblib"], ["experiment=smoke", "dataset.sample_size=3"],
    ["--cfg", "job"], ["llm=openai", "llm.temperature=0.3", "judge=[lexical,llm]", "judge.model=openai/gpt-4o"],
    ["dataset=custom", "dataset.path=/tmp"], ["resume=false", "objective=retrieval/mrr"],
    ["retrieval=bm25", "retrieval.parent_vectors=mean"], ["experiment=easyrag_two_stage"],
    ["-m", "dataset=glob(*,exclude=beir)"], ["-m", "judge=[lexical],[lexical,llm]"], ["reranker=null"],
    ["hydra.searchpath=[file:///tmp/mine]", "dataset=my_own"], ["--config-dir", "/tmp/mine", "-m", "llm=mine,openai"],
])
def test_valid_command_lines_pass(argv):
    check_overrides(argv)


@pytest.mark.parametrize(("value", "kwargs", "expected"), [
    (5, {"lo": 1, "integer": True}, 5), (5.0, {"lo": 1, "integer": True}, 5), (0.0, {"lo": 0, "hi": 2}, 0.0),
    (None, {"optional": True}, None), (1e-9, {"lo": 0, "lo_open": True}, 1e-9),
])
def test_number_returns_good_values(value, kwargs, expected):
    got = number("x", value, **kwargs)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "3", True, None, [1]])
def test_number_refuses_non_numbers(value):
    assert one_line_error(number, "x.y", value).startswith("x.y=")
