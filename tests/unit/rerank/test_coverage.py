"""reranker=coverage: the facets of a question and the selection order, worked by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import ragbench
from ragbench.errors import ConfigError, RagbenchError
from ragbench.protocols import Reranker
from ragbench.rerank.coverage import CoverageReranker, facets
from ragbench.types import Chunk, ChunkTree, Hit, Level, Query

TEXTS = {"h1": "Caroline painted a lake", "h2": "Caroline again", "h3": "Melanie ran", "h4": "the weather"}
TREE = ChunkTree(chunks={c: Chunk(chunk_id=c, doc_id="d", level=Level.SENTENCE, text=t, parent_id=None)
                         for c, t in TEXTS.items()})
QUERY = Query(qid="q", text="caroline and melanie", answers=("x",), question_type="t")
HITS = [Hit(chunk_id=c, score=10.0 - i, rank=i + 1) for i, c in enumerate(TEXTS)]  # scores 10, 9, 8, 7
E = np.eye(4)


def run(vectors: dict[str, np.ndarray], k: int = 4, lambda_: float = 0.5) -> list[Hit]:
    return CoverageReranker(lambda_=lambda_).rerank(QUERY, HITS, tree=TREE, k=k, query_vector=None,
                                                    chunk_vectors=vectors)


def test_facets_by_clause_then_by_term() -> None:
    assert facets("What did Caroline and Melanie paint?") == [{"caroline"}, {"melanie", "paint"}]
    assert facets("Revenue in 2022 vs. 2021; margin?") == [{"revenue", "2022"}, {"2021"}, {"margin"}]
    # one clause: each content term is a facet (question words and stopwords dropped)
    assert facets("When did Caroline go to the LGBTQ support group?") == [
        {"caroline"}, {"go"}, {"lgbtq"}, {"support"}, {"group"}]
    assert facets("What is it?") == []


def test_covers_melanie_before_a_second_caroline_hit() -> None:
    """Orthogonal vectors (no redundancy); relevance (10-7)/3 .. 0 = 1, 2/3, 1/3, 0; value = 0.5 * relevance.
    Pick 1: h1 (covers caroline, 0.5). Pick 2: only h3 covers a new facet (melanie): h3 (1/6), not h2 (1/3).
    Then every facet is covered: plain MMR, h2 (1/3), h4 (0)."""
    got = run({c: E[i] for i, c in enumerate(TEXTS)})
    assert [h.chunk_id for h in got] == ["h1", "h3", "h2", "h4"]
    assert [h.rank for h in got] == [1, 2, 3, 4]
    assert [h.score for h in got] == pytest.approx([0.5, 1 / 6, 1 / 3, 0.0])


def test_after_coverage_it_is_mmr() -> None:
    """h2 duplicates h1's vector: after h1, h3, its value is 0.5 * 2/3 - 0.5 * 1 = -1/6 < h4's 0."""
    got = run({"h1": E[0], "h2": E[0], "h3": E[1], "h4": E[2]})
    assert [h.chunk_id for h in got] == ["h1", "h3", "h4", "h2"]
    assert got[3].score == pytest.approx(-1 / 6)
    assert [h.chunk_id for h in run({"h1": E[0], "h2": E[0], "h3": E[1], "h4": E[2]}, k=2)] == ["h1", "h3"]


def test_no_facet_is_plain_mmr_and_bad_input_is_named() -> None:
    q = Query(qid="q", text="what is it?", answers=("x",), question_type="t")
    got = CoverageReranker().rerank(q, HITS, tree=TREE, k=4, query_vector=None,
                                    chunk_vectors={"h1": E[0], "h2": E[0], "h3": E[1], "h4": E[2]})
    assert [h.chunk_id for h in got] == ["h1", "h3", "h4", "h2"]
    with pytest.raises(RagbenchError, match="needs a vector for every hit"):
        run({"h1": E[0]})
    with pytest.raises(ConfigError, match="lambda_"):
        CoverageReranker(lambda_=1.5)


def test_config_instantiates(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("defaults:\n  - reranker: coverage\n  - _self_\n")
    (tmp_path / "reranker").symlink_to(Path(ragbench.__file__).parent / "conf" / "reranker")
    with initialize_config_dir(config_dir=str(tmp_path), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["reranker=[cross_encoder,coverage]"])
    assert list(cfg.reranker.rerankers) == ["cross_encoder", "coverage"]
    obj = instantiate(cfg.reranker.rerankers.coverage)
    assert isinstance(obj, CoverageReranker) and isinstance(obj, Reranker) and obj.needs_vectors
