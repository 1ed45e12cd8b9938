"""Ctrl-C during the embedding stage: the encoder checks the interrupt flag before every batch, so the
first signal stops the stage within one batch (it used to wait for the whole stage, 60.8 s on LoCoMo), and
watching the call (the flag, a progress bar) leaves the vectors bit for bit those of one plain call."""

from __future__ import annotations

import signal

import numpy as np
import pytest

from ragbench import interrupts
from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder

pytestmark = pytest.mark.slow

TEXTS = [f"turn {i}: " + "Melanie ran a charity race for mental health, then painted a sunrise. " * (i % 7 + 1)
         for i in range(400)]


def test_the_first_signal_stops_encoding_within_one_batch():
    embedder = SentenceTransformerEmbedder(show_progress=False, batch_size=16)
    st = embedder._load()
    batches = []

    def count(_module, _args):
        batches.append(1)
        if len(batches) == 3:  # as if Ctrl-C came during the third batch
            interrupts._handler(signal.SIGINT, None)

    hook = st.register_forward_hook(lambda m, a, o: count(m, a))
    try:
        with pytest.raises(interrupts.Interrupted):
            embedder.embed_documents(TEXTS)
    finally:
        hook.remove()
        interrupts.reset()
    assert len(batches) == 3  # 25 batches in all: the fourth never started


def test_the_watched_call_gives_the_vectors_of_one_plain_call():
    embedder = SentenceTransformerEmbedder(show_progress=False, batch_size=16)
    plain = embedder._load().encode(TEXTS, batch_size=16, normalize_embeddings=True, convert_to_numpy=True)
    assert np.array_equal(embedder.embed_documents(TEXTS), plain)
