"""Ctrl-C during the embedding stage: the encoder checks the interrupt flag before every batch, so the
first signal stops the stage within one batch (it used to wait for the whole stage, 60.8 s on LoCoMo), and
watching the call (the flag, a progress bar) leaves the vectors bit for bit those of its batches encoded
plainly."""

from __future__ import annotations

import signal

import numpy as np
import pytest

from ragbench import interrupts
from ragbench.embed.batches import by_length
from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder

pytestmark = pytest.mark.slow

TEXTS = [f"turn {i}: " + "Melanie ran a charity race for mental health, then painted a sunrise. " * (i % 7 + 1)
         for i in range(400)]


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_the_first_signal_stops_encoding_within_one_batch(backend, monkeypatch):
    embedder = SentenceTransformerEmbedder(show_progress=False, batch_size=16, backend=backend)
    model = embedder._load()
    batches = []
    encode = model.encode

    def counted(texts):
        out = encode(texts)
        batches.append(len(texts))
        if len(batches) == 3:  # as if Ctrl-C came during the third batch
            interrupts._handler(signal.SIGINT, None)
        return out

    monkeypatch.setattr(model, "encode", counted)
    try:
        with pytest.raises(interrupts.Interrupted):
            embedder.embed_documents(TEXTS)
    finally:
        interrupts.reset()
    assert batches == [16, 16, 16]  # 25 batches in all: the fourth never started


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_the_watched_call_gives_the_vectors_of_its_batches_encoded_plainly(backend):
    embedder = SentenceTransformerEmbedder(show_progress=False, batch_size=16, backend=backend)
    model = embedder._load()
    plain = np.empty((len(TEXTS), model.dim), dtype=np.float32)
    for rows in by_length(model.lengths(TEXTS), 16):
        plain[rows] = model.encode([TEXTS[i] for i in rows])
    assert np.array_equal(embedder.embed_documents(TEXTS), plain)
