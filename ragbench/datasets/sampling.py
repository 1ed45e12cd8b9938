"""OpenViking's three sampling modes: whole dataset, ``num_docs`` documents, ``sample_size`` questions."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

from ragbench.errors import ConfigError
from ragbench.types import Document, Query


def _stratified(items: list[Query], n: int, rng: random.Random) -> list[Query]:
    """``n`` queries spread over question types in proportion to their counts (largest remainder)."""
    by_type: dict[str, list[Query]] = defaultdict(list)
    for q in items:
        by_type[q.question_type].append(q)
    total = len(items)
    quotas = {t: n * len(qs) / total for t, qs in by_type.items()}
    counts = {t: int(v) for t, v in quotas.items()}
    rest = n - sum(counts.values())
    for t in sorted(quotas, key=lambda t: (counts[t] - quotas[t], t))[:rest]:
        counts[t] += 1
    chosen: list[Query] = []
    for t in sorted(by_type):
        chosen.extend(rng.sample(by_type[t], counts[t]))
    return chosen


def sample(
    docs: Sequence[Document],
    queries: Sequence[Query],
    *,
    num_docs: int | None,
    sample_size: int | None,
    stratify: bool,
    seed: int,
) -> tuple[list[Document], list[Query]]:
    """Applies the sampling spec; keeps the original order of what is kept. Seeded, deterministic."""
    if num_docs is not None and sample_size is not None:
        raise ConfigError("set only one of dataset.num_docs and dataset.sample_size (or neither for all)")
    rng = random.Random(seed)
    docs, queries = list(docs), list(queries)
    if num_docs is not None:
        if num_docs < 1:
            raise ConfigError(f"dataset.num_docs must be >= 1, got {num_docs}")
        if stratify:
            # pick documents round-robin over the question type each document has most of
            main: dict[str, str] = {}
            for d in docs:
                types = [q.question_type for q in queries if d.doc_id in q.doc_ids]
                main[d.doc_id] = max(sorted(set(types)), key=types.count) if types else ""
            groups: dict[str, list[str]] = defaultdict(list)
            for doc_id, t in main.items():
                groups[t].append(doc_id)
            for ids in groups.values():
                rng.shuffle(ids)
            picked: list[str] = []
            while len(picked) < min(num_docs, len(docs)):
                for t in sorted(groups):
                    if groups[t] and len(picked) < num_docs:
                        picked.append(groups[t].pop())
            keep = set(picked)
        else:
            keep = set(rng.sample([d.doc_id for d in docs], min(num_docs, len(docs))))
        docs = [d for d in docs if d.doc_id in keep]
        queries = [q for q in queries if not q.doc_ids or set(q.doc_ids) <= keep]
    elif sample_size is not None:
        if sample_size < 1:
            raise ConfigError(f"dataset.sample_size must be >= 1, got {sample_size}")
        n = min(sample_size, len(queries))
        chosen = _stratified(queries, n, rng) if stratify else rng.sample(queries, n)
        ids = {q.qid for q in chosen}
        queries = [q for q in queries if q.qid in ids]
    return docs, queries
