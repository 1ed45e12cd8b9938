"""judge=semantic's pure parts: BERTScore's greedy matching and ROUGE-L against hand-worked values, the metric
declarations, the config it is built from and its one-line errors. No model loads here (the model-backed values,
and their agreement with the bert-score package, are tests/integration/test_semantic.py's)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from ragbench.errors import ConfigError
from ragbench.judge.semantic import (
    KEYS,
    SemanticJudge,
    Tokens,
    cosine,
    greedy_f1,
    require,
    rouge_l,
    rouge_scorer,
    semantic_judges,
)
from ragbench.metric_keys import metric_info

CONF = Path(__file__).resolve().parents[3] / "ragbench" / "conf" / "judge" / "semantic.yaml"


def _tokens(rows: list[list[float]], content: list[bool]) -> Tokens:
    arr = np.asarray(rows, dtype=np.float64)
    arr = arr / np.linalg.norm(arr, axis=1, keepdims=True)
    return Tokens(rows=arr, content=np.asarray(content), sentence=arr.mean(axis=0))


def test_greedy_f1_hand_worked() -> None:
    # candidate [CLS]=e1 a=e1 b=e2 [SEP]=e3; reference [CLS]=e1 a=(e1+e2)/sqrt2 [SEP]=e3
    cand = _tokens([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], [False, True, True, False])
    ref = _tokens([[1, 0, 0], [1, 1, 0], [0, 0, 1]], [False, True, False])
    # P: a's best is the reference [CLS] (1; special tokens are matches), b's is ref a (1/sqrt2); mean 0.853553
    # R: ref a's best is 1/sqrt2 (any of cand [CLS], a, b); F1 = 2PR / (P + R) = 0.773459
    p, r = (1 + 1 / math.sqrt(2)) / 2, 1 / math.sqrt(2)
    assert greedy_f1(cand, ref) == pytest.approx(2 * p * r / (p + r), abs=1e-12)
    assert greedy_f1(cand, ref) == pytest.approx(0.773459, abs=1e-6)
    assert greedy_f1(cand, cand) == pytest.approx(1.0)


def test_greedy_f1_without_content_tokens_is_zero() -> None:
    only_special = _tokens([[1, 0, 0], [0, 0, 1]], [False, False])
    cand = _tokens([[1, 0, 0], [1, 0, 0], [0, 0, 1]], [False, True, False])
    assert greedy_f1(only_special, cand) == 0.0
    assert greedy_f1(cand, only_special) == 0.0


def test_greedy_f1_opposite_tokens_is_zero_not_negative_nan() -> None:
    cand = _tokens([[1, 0], [1, 0]], [False, True])
    ref = _tokens([[-1, 0], [-1, 0]], [False, True])
    assert greedy_f1(cand, ref) == 0.0  # P = R = -1: P + R <= 0


def test_cosine() -> None:
    assert cosine(np.array([1.0, 0.0]), np.array([1.0, 1.0])) == pytest.approx(1 / math.sqrt(2))
    assert cosine(np.array([0.0, 0.0]), np.array([1.0, 1.0])) == 0.0


def test_rouge_l_hand_worked() -> None:
    plain = rouge_scorer(False)
    # LCS of "the cat sat on the mat" / "the cat was on the mat": the cat on the mat (5 of 6 tokens each)
    assert rouge_l(plain, "the cat sat on the mat", ["the cat was on the mat"]) == pytest.approx(5 / 6)
    # P = 2/3 (2 of 3 answer tokens), R = 2/2: F = 2 * (2/3) / (2/3 + 1) = 0.8; max over golds
    assert rouge_l(plain, "Paris, France today", ["nothing", "paris france"]) == pytest.approx(0.8)
    assert rouge_l(plain, "cats running", ["cat run"]) == 0.0  # no stemming by default
    assert rouge_l(rouge_scorer(True), "cats running", ["cat run"]) == pytest.approx(1.0)  # Porter stems


def test_declared_as_scores_higher_is_better() -> None:
    for key in KEYS:
        info = metric_info(key)
        assert info.kind == "score" and info.higher_is_better
        assert metric_info(f"by_type/temporal/{key}").kind == "score"


def test_unknown_embedder_name_is_one_config_error() -> None:
    with pytest.raises(ConfigError, match=r"judge.embedder='minilmm' is not an embedder; choose one of .*minilm"):
        SemanticJudge(embedder="minilmm")


def test_no_embedder_names_the_fix() -> None:
    with pytest.raises(ConfigError, match="judge.embedder=minilm"):
        SemanticJudge()


def test_missing_package_names_the_pip_fix() -> None:
    require("rouge_score")  # installed: no error
    with pytest.raises(ConfigError, match="fix: pip install no-such-pkg") as info:
        require("no-such-pkg")
    assert "\n" not in str(info.value)


def test_rebuilt_from_a_recorded_config_with_the_judge_wide_keys() -> None:
    judge_node = OmegaConf.to_container(OmegaConf.load(CONF))
    assert isinstance(judge_node, dict)
    judge_node.update(rouge_stemmer=True, model="openai/gpt-4o-mini")  # another judge's wide key: not taken
    embedder = OmegaConf.to_container(OmegaConf.load(CONF.parents[1] / "embedder" / "minilm.yaml"))
    judge_node["judges"]["semantic"]["job_embedder"] = embedder
    config = {"judge": judge_node, "embedder": embedder}
    (judge,) = semantic_judges(config)
    assert judge.stemmer is True
    assert judge.shared  # the job's MiniLM is the BERTScore encoder: one forward pass for both metrics
    assert "all-MiniLM-L6-v2" in judge.identity and "stemmer=1" in judge.identity
    assert judge.log_params()["judge/semantic/bertscore_layer"] == 6
    assert semantic_judges({"judge": {"judges": {"lexical": {"_target_": "ragbench.judge.lexical.LexicalJudge"}}}}) == []
