"""The embedder's batching and the exported model's numpy pooling, on hand-worked examples (the pooling is also
checked against sentence-transformers' own Pooling module in tests/integration/test_onnx_encoder.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from ragbench.embed.batches import by_length
from ragbench.embed.onnx_encoder import LAYOUT_FILE, Layout, OnnxEncoder, describe, pool, read_layout
from ragbench.errors import ModelLoadError


def test_batches_go_longest_first_and_equal_lengths_keep_their_order():
    batches = by_length([3, 5, 5, 1, 4], 2)
    assert [b.tolist() for b in batches] == [[1, 2], [4, 0], [3]]
    assert [b.tolist() for b in by_length([2, 2, 2], 5)] == [[0, 1, 2]]
    assert by_length([], 4) == []


def test_token_order_pads_less_than_character_order():
    # characters and word pieces disagree: "2023-05-07" is short in characters, long in word pieces
    tokens = [9, 3, 9, 3]
    chars = [10, 30, 40, 20]
    padded = lambda order: sum(max(tokens[i] for i in b) * len(b) for b in order)  # noqa: E731
    by_chars = [list(np.argsort([-c for c in chars], kind="stable")[i:i + 2]) for i in (0, 2)]
    assert padded(by_length(tokens, 2)) == 24 < padded(by_chars) == 36


HIDDEN = np.array([[[1.0, 0.0], [3.0, 4.0], [100.0, 100.0]],   # third position is padding
                   [[0.0, 2.0], [0.0, 0.0], [0.0, 0.0]]], dtype=np.float32)
MASK = np.array([[1, 1, 0], [1, 0, 0]])


def test_mean_pooling_ignores_padding_and_normalises():
    out = pool(HIDDEN, MASK, "mean")
    assert out.dtype == np.float32
    assert np.allclose(out[0], np.array([2.0, 2.0]) / np.sqrt(8.0))  # mean of (1,0) and (3,4), unit length
    assert np.allclose(out[1], [0.0, 1.0])


def test_cls_and_max_pooling():
    assert np.allclose(pool(HIDDEN, MASK, "cls"), [[1.0, 0.0], [0.0, 1.0]])
    assert np.allclose(pool(HIDDEN, MASK, "max")[0], np.array([3.0, 4.0]) / 5.0)  # the padded 100s never win


def test_a_zero_vector_stays_zero():
    assert np.array_equal(pool(np.zeros((1, 2, 3), np.float32), np.ones((1, 2)), "mean"), np.zeros((1, 3)))


def _module(name: str, **attrs):
    return type(name, (), attrs)()


class _Seq(list):
    """What describe reads of a SentenceTransformer: its modules in order, and max_seq_length."""

    max_seq_length = 256


def _st(*modules):
    tokenizer = SimpleNamespace(model_input_names=["input_ids", "attention_mask"], backend_tokenizer=object())
    return _Seq([_module("Transformer", tokenizer=tokenizer), *modules])


def test_the_common_layout_runs_and_others_say_why():
    ok = describe(_st(_module("Pooling", pooling_mode="mean", embedding_dimension=384), _module("Normalize")))
    assert ok == Layout(pooling="mean", max_seq_length=256, dim=384, input_names=("input_ids", "attention_mask"))
    dense = describe(_st(_module("Pooling", pooling_mode="mean", embedding_dimension=384), _module("Dense")))
    assert dense.why == "its modules are Transformer -> Pooling -> Dense, not Transformer -> Pooling [-> Normalize]"
    weighted = describe(_st(_module("Pooling", pooling_mode="weightedmean", embedding_dimension=384)))
    assert weighted.why == "its pooling is 'weightedmean', not one of mean, cls, max"
    slow = _st(_module("Pooling", pooling_mode="mean", embedding_dimension=384))
    slow[0].tokenizer.backend_tokenizer = None
    assert describe(slow).why == "its tokenizer is not a fast one (the tokenizers package)"


def test_an_export_without_its_layout_file_names_the_file_and_the_fix(tmp_path):
    with pytest.raises(ModelLoadError, match=f"no readable {LAYOUT_FILE}.*fix: python -m ragbench.cache reset"):
        read_layout(tmp_path)


def test_an_unsupported_layout_is_refused_before_any_session(tmp_path):
    (tmp_path / LAYOUT_FILE).write_text(json.dumps({"pooling": "mean", "max_seq_length": 128, "dim": 8,
                                                    "input_names": ["input_ids"], "why": "its modules are X"}))
    with pytest.raises(ModelLoadError, match="its modules are X; fix: embedder.backend=torch"):
        OnnxEncoder(tmp_path, run=lambda feeds: np.zeros(0))
