"""RRFRetriever: hand-worked fusion, candidates, vectors routing, Hydra instantiation, errors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import ragbench
from ragbench.errors import ConfigError, RagbenchError
from ragbench.protocols import Retriever
from ragbench.retrieval.bm25 import BM25Retriever
from ragbench.retrieval.hybrid import RRFRetriever, rrf_fuse
from ragbench.types import Hit

CONF = Path(ragbench.__file__).parent / "conf"


class StandInRetriever:
    """Returns a fixed ranking per query (stand-in for the dense faiss retriever in unit tests)."""

    def __init__(self, rankings: Sequence[Sequence[str]], needs_vectors: bool = False) -> None:
        self.rankings = [list(r) for r in rankings]
        self.needs_vectors = needs_vectors
        self.built_with: dict[str, Any] = {}
        self.asked_k: list[int] = []

    def params(self) -> Mapping[str, Any]:
        return {"stand_in": True}

    def build(self, *, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray | None) -> None:
        self.built_with = {"ids": list(ids), "vectors": vectors}

    def search(self, *, texts: Sequence[str], vectors: np.ndarray | None, k: int) -> list[list[Hit]]:
        self.asked_k.append(k)
        return [
            [Hit(chunk_id=c, score=1.0 / (i + 1), rank=i + 1) for i, c in enumerate(self.rankings[q][:k])]
            for q in range(len(texts))
        ]


def _ids(hits: Sequence[Hit]) -> list[str]:
    return [h.chunk_id for h in hits]


def test_rrf_hand_worked_equal_weights() -> None:
    a = StandInRetriever([["x", "y", "z"]])
    b = StandInRetriever([["y", "w"]])
    [hits] = RRFRetriever(children=[a, b], k_rrf=60, candidates=10).search(texts=["q"], vectors=None, k=4)
    assert _ids(hits) == ["y", "x", "w", "z"]
    assert [h.score for h in hits] == pytest.approx([1 / 62 + 1 / 61, 1 / 61, 1 / 62, 1 / 63])
    assert [h.rank for h in hits] == [1, 2, 3, 4]


def test_rrf_weights_change_order() -> None:
    a = StandInRetriever([["x", "y", "z"]])
    b = StandInRetriever([["y", "w"]])
    r = RRFRetriever(children=[a, b], weights=[1.0, 0.5], k_rrf=60, candidates=10)
    [hits] = r.search(texts=["q"], vectors=None, k=10)
    assert _ids(hits) == ["y", "x", "z", "w"]  # w: 0.5/62 < z: 1/63
    assert hits[0].score == pytest.approx(1 / 62 + 0.5 / 61)


def test_rrf_ties_keep_first_seen_order_and_k_rrf_zero() -> None:
    hits = rrf_fuse(
        [[Hit("a", 9, 1), Hit("b", 8, 2)], [Hit("c", 5, 1), Hit("d", 4, 2)]], weights=[1, 1], k_rrf=0, k=3
    )
    assert _ids(hits) == ["a", "c", "b"]
    assert [h.score for h in hits] == pytest.approx([1.0, 1.0, 0.5])


def test_children_search_candidates_and_k_cuts() -> None:
    a = StandInRetriever([[f"a{i}" for i in range(100)]])
    b = StandInRetriever([[f"b{i}" for i in range(100)]])
    r = RRFRetriever(children=[a, b], candidates=20)
    assert len(r.search(texts=["q"], vectors=None, k=5)[0]) == 5
    assert a.asked_k == [20] and b.asked_k == [20]
    assert len(r.search(texts=["q"], vectors=None, k=30)[0]) == 30  # k above candidates widens children
    assert a.asked_k[-1] == 30


def test_needs_vectors_and_routing() -> None:
    lexical = StandInRetriever([["x"]], needs_vectors=False)
    dense = StandInRetriever([["x"]], needs_vectors=True)
    assert RRFRetriever(children=[lexical]).needs_vectors is False
    r = RRFRetriever(children=[lexical, dense])
    assert r.needs_vectors is True and isinstance(r, Retriever)
    vecs = np.eye(2, dtype=np.float32)
    r.build(ids=["x", "y"], texts=["a", "b"], vectors=vecs)
    assert dense.built_with["vectors"] is vecs and lexical.built_with["ids"] == ["x", "y"]
    with pytest.raises(RagbenchError, match="needs chunk vectors"):
        r.build(ids=["x"], texts=["a"], vectors=None)


def test_batch_with_real_bm25_and_stand_in_dense() -> None:
    texts = ["the cat sat on the mat", "dogs run in the park", "stock prices fell sharply", "a cat and a dog"]
    ids = ["c0", "c1", "c2", "c3"]
    dense = StandInRetriever([["c2", "c3"], ["c1", "c0"]], needs_vectors=True)
    r = RRFRetriever(children=[dense, BM25Retriever()], k_rrf=1, candidates=4)
    r.build(ids=ids, texts=texts, vectors=np.zeros((4, 3), dtype=np.float32))
    res = r.search(texts=["cat", "park dogs"], vectors=np.zeros((2, 3), dtype=np.float32), k=3)
    # q0 with k_rrf=1: dense c2 1/2, c3 1/3; bm25 "cat": c3 (2 terms) 1/2 before c0 (3 terms) 1/3
    assert _ids(res[0]) == ["c3", "c2", "c0"]
    assert [h.score for h in res[0]] == pytest.approx([1 / 3 + 1 / 2, 1 / 2, 1 / 3])
    assert _ids(res[1])[0] == "c1"


def test_params_name_children() -> None:
    r = RRFRetriever(children=[BM25Retriever(k1=0.9)], k_rrf=10, candidates=7)
    p = r.params()
    assert p["k_rrf"] == 10 and p["candidates"] == 7 and p["weights"] == [1.0]
    assert p["children"][0]["class"] == "ragbench.retrieval.bm25.BM25Retriever"
    assert p["children"][0]["k1"] == 0.9


def test_errors() -> None:
    child = StandInRetriever([["x"]])
    with pytest.raises(ConfigError, match="children is empty"):
        RRFRetriever(children=[])
    with pytest.raises(ConfigError, match="weights"):
        RRFRetriever(children=[child], weights=[1.0, 1.0])
    with pytest.raises(ConfigError, match="weights"):
        RRFRetriever(children=[child], weights=[0.0])
    with pytest.raises(ConfigError, match="k_rrf"):
        RRFRetriever(children=[child], k_rrf=-1)
    with pytest.raises(ConfigError, match="candidates"):
        RRFRetriever(children=[child], candidates=0)
    with pytest.raises(ConfigError, match=r"children\[0\] is a dict"):
        RRFRetriever(children=[{"_target_": "x"}])  # type: ignore[list-item]


def test_yaml_instantiates_with_overrides(tmp_path: Path) -> None:
    # A minimal root config over the shipped retrieval group, so the real YAML and CLI syntax are used.
    (tmp_path / "config.yaml").write_text("defaults:\n  - retrieval: hybrid\n  - _self_\n")
    (tmp_path / "retrieval").symlink_to(CONF / "retrieval")
    (tmp_path / "_retrieval").symlink_to(CONF / "_retrieval")  # the keys every retrieval option merges in
    with initialize_config_dir(config_dir=str(tmp_path), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[
                "retrieval.retriever.children.1.k1=0.9",
                "retrieval.retriever.k_rrf=10",
                "retrieval.topk=3",
            ],
        )
        bm25_cfg = compose(
            config_name="config", overrides=["retrieval=bm25", "retrieval.retriever.stemming=false"]
        )
    assert cfg.retrieval.topk == 3
    r = instantiate(cfg.retrieval.retriever)
    assert isinstance(r, RRFRetriever) and r.needs_vectors is True and r.k_rrf == 10
    assert type(r.children[0]).__name__ == "FaissRetriever"
    assert isinstance(r.children[1], BM25Retriever) and r.children[1].k1 == 0.9
    b = instantiate(bm25_cfg.retrieval.retriever)
    assert isinstance(b, BM25Retriever) and b.stemming is False and bm25_cfg.retrieval.topk == 5


def test_real_faiss_and_bm25_children() -> None:
    from ragbench.retrieval.dense import FaissRetriever

    texts = ["red apples and pears", "green pears", "blue sky at night", "apple pie recipe"]
    ids = ["a", "b", "c", "d"]
    vecs = np.array([[1, 0, 0], [0.8, 0.6, 0], [0, 0, 1], [0.6, 0, 0.8]], dtype=np.float32)
    r = RRFRetriever(children=[FaissRetriever(index="flat"), BM25Retriever()], k_rrf=60, candidates=3)
    r.build(ids=ids, texts=texts, vectors=vecs)
    [hits] = r.search(texts=["pears"], vectors=np.array([[0.1, 0, 1]], dtype=np.float32), k=3)
    # faiss top 3: c 1.0, d 0.86, a 0.1 (b 0.08 cut); bm25: b (2 terms) then a (3 terms)
    # c: 1/61; d: 1/62; a: 1/63 + 1/62; b: 1/61 -> a, then c and b tie (c first seen); d is 4th
    assert _ids(hits) == ["a", "c", "b"]
    assert hits[0].score == pytest.approx(1 / 63 + 1 / 62)
