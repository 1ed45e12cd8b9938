"""OpenViking's three sampling modes: whole dataset, ``num_docs`` documents, ``sample_size`` questions.

- neither set: everything.
- ``num_docs=N``: N documents with all their questions. A question about several documents
  (MultiHop-RAG) is kept only with all of them, so when any question spans documents the documents
  are drawn question by question (whole questions while they fit in N, then single documents to fill
  up). Questions naming no document (e.g. corpus-wide unanswerable ones) are kept in the same
  proportion as the documents.
- ``sample_size=N``: N questions; the corpus stays whole (distractors stay in).
- ``stratify``: documents round-robin over question types (each document counts as the type most of
  its questions have), or questions by largest-remainder quotas per type.

Seeded and deterministic; kept documents and questions stay in their original order.
"""

from __future__ import annotations

import logging
import random
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from ragbench.datasets import openviking_sampling
from ragbench.errors import ConfigError
from ragbench.types import Document, Query

log = logging.getLogger(__name__)


def _check(key: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"dataset.{key} must be a whole number >= 1 or null (all), got {value!r}")
    if value < 1:
        raise ConfigError(f"dataset.{key} must be >= 1 (or null for all), got {value}")


def check_max_queries(value: int | None) -> None:
    """``dataset.max_queries``: the first N questions in file order, or null for all."""
    _check("max_queries", value)


def check_spec(*, num_docs: int | None, sample_size: int | None, stratify: bool, seed: int) -> None:
    """The sampling keys checked when the adapter is built (before MLflow starts), with their ranges.

    A seed must be a whole number: ``seed=nan`` or ``1.5`` would seed ``random`` differently from what the
    fingerprint records (nan != nan), so reruns would draw different samples under one fingerprint.
    """
    _check("num_docs", num_docs)
    _check("sample_size", sample_size)
    if num_docs is not None and sample_size is not None:
        raise ConfigError("set only one of dataset.num_docs and dataset.sample_size (or neither for all)")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"dataset.seed must be a whole number (e.g. 42), got {seed!r}")
    if not 0 <= seed < 2**63:
        raise ConfigError(f"dataset.seed must be between 0 and 2**63-1, got {seed}")
    if not isinstance(stratify, bool):
        raise ConfigError(f"dataset.stratify must be true or false, got {stratify!r}")


def quotas(counts: dict[str, int], n: int) -> dict[str, int]:
    """``n`` split over types in proportion to ``counts`` (largest remainder; ties by type name)."""
    total = sum(counts.values())
    exact = {t: n * c / total for t, c in counts.items()}
    out = {t: int(v) for t, v in exact.items()}
    rest = n - sum(out.values())
    for t in sorted(exact, key=lambda t: (out[t] - exact[t], t))[:rest]:
        out[t] += 1
    return out


def _stratified(items: list[Query], n: int, rng: random.Random) -> list[Query]:
    """``n`` queries spread over question types in proportion to their counts."""
    by_type: dict[str, list[Query]] = defaultdict(list)
    for q in items:
        by_type[q.question_type].append(q)
    chosen: list[Query] = []
    for t, k in sorted(quotas({t: len(qs) for t, qs in by_type.items()}, n).items()):
        chosen.extend(rng.sample(by_type[t], k))
    return chosen


def _round_robin(groups: dict[str, list[str]], rng: random.Random) -> list[str]:
    """Items of shuffled groups interleaved one per group in type-name order."""
    pools = {t: rng.sample(ids, len(ids)) for t, ids in sorted(groups.items())}
    out: list[str] = []
    while any(pools.values()):
        for t in sorted(pools):
            if pools[t]:
                out.append(pools[t].pop())
    return out


def _doc_order(docs: list[Document], queries: list[Query], stratify: bool, rng: random.Random) -> list[str]:
    ids = [d.doc_id for d in docs]
    if not stratify:
        return rng.sample(ids, len(ids))
    types: dict[str, list[str]] = defaultdict(list)
    for q in queries:
        for d in q.doc_ids:
            types[d].append(q.question_type)
    groups: dict[str, list[str]] = defaultdict(list)
    for d in ids:
        ts = types.get(d, [])
        groups[max(sorted(set(ts)), key=ts.count) if ts else ""].append(d)
    return _round_robin(groups, rng)


def _pick_docs(docs: list[Document], queries: list[Query], n: int, stratify: bool, rng: random.Random) -> set[str]:
    known = {d.doc_id for d in docs}
    if not any(len(q.doc_ids) > 1 for q in queries):
        return set(_doc_order(docs, queries, stratify, rng)[:n])
    with_docs = [q for q in queries if q.doc_ids]
    if stratify:
        groups: dict[str, list[str]] = defaultdict(list)
        for q in with_docs:
            groups[q.question_type].append(q.qid)
        by_id = {q.qid: q for q in with_docs}
        order = [by_id[i] for i in _round_robin(groups, rng)]
    else:
        order = rng.sample(with_docs, len(with_docs))
    keep: list[str] = []
    for q in order:
        new = [d for d in dict.fromkeys(q.doc_ids) if d in known and d not in keep]
        if new and len(keep) + len(new) <= n:
            keep.extend(new)
        if len(keep) == n:
            break
    for d in rng.sample(sorted(known), len(known)):
        if len(keep) >= n:
            break
        if d not in keep:
            keep.append(d)
    return set(keep)


def sample(
    docs: Sequence[Document],
    queries: Sequence[Query],
    *,
    num_docs: int | None,
    sample_size: int | None,
    stratify: bool,
    seed: int,
    dataset: str = "dataset",
    max_queries: int | None = None,
    sampling: str | None = None,
    root: Path | None = None,
) -> tuple[list[Document], list[Query]]:
    """Applies the sampling spec (see the module docstring). Seeded, deterministic, order-keeping.
    ``max_queries=N`` then keeps the first N remaining questions in file order (OpenViking's
    ``max_queries``); the corpus stays whole. ``sampling="openviking"`` takes the benchmark suite's own
    subset of the files under ``root`` instead (``ragbench.datasets.openviking_sampling``).

    Asking for more than there is keeps everything, with a warning that gives the real count.
    """
    check_spec(num_docs=num_docs, sample_size=sample_size, stratify=stratify, seed=seed)
    rng = random.Random(seed)
    docs, queries = list(docs), list(queries)
    if num_docs is not None and num_docs > len(docs):
        log.warning("%s: dataset.num_docs=%d but the dataset has only %d documents; using all %d",
                    dataset, num_docs, len(docs), len(docs))
    if sample_size is not None and sample_size > len(queries):
        log.warning("%s: dataset.sample_size=%d but the dataset has only %d questions; using all %d",
                    dataset, sample_size, len(queries), len(queries))
    if sampling is not None and root is not None:
        docs, queries = openviking_sampling.apply(dataset, root, docs, queries)
    elif num_docs is not None and num_docs < len(docs):
        keep = _pick_docs(docs, queries, num_docs, stratify, rng)
        docless = [q.qid for q in queries if not q.doc_ids]
        share = set(rng.sample(docless, round(len(docless) * len(keep) / len(docs))))
        docs = [d for d in docs if d.doc_id in keep]
        queries = [q for q in queries if (set(q.doc_ids) <= keep if q.doc_ids else q.qid in share)]
    elif sample_size is not None and sample_size < len(queries):
        chosen = _stratified(queries, sample_size, rng) if stratify else rng.sample(queries, sample_size)
        ids = {id(q) for q in chosen}
        queries = [q for q in queries if id(q) in ids]
    if max_queries is not None:
        check_max_queries(max_queries)
        queries = queries[:max_queries]
    return docs, queries
