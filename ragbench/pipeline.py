"""Stage order and timing: dataset -> chunks -> vectors -> index -> hits -> rerank -> contexts -> answer
-> verdicts. No component logic lives here, and no MLflow: the tracker gets the JobResult."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragbench.errors import ConfigError
from ragbench.evidence import (
    EvidenceMap,
    EvidenceMatcher,
    context_has_evidence,
    evidence_recall,
    match_stats,
    relevant_searchable,
    unit_ranking,
)
from ragbench.expand import count_tokens
from ragbench.judge.aggregate import aggregate
from ragbench.judge.ir import retrieval_metrics
from ragbench.protocols import Chunker, DatasetAdapter, Embedder, Expander, Generator, Judge, Reranker, Retriever
from ragbench.types import Answer, CaseResult, ChunkTree, EvalSet, Hit, Query

log = logging.getLogger(__name__)

INDEX_SCHEMA = 1
BASE_KS = (1, 3, 5)
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Components:
    """Everything one job runs, already instantiated from the config."""

    dataset: DatasetAdapter
    chunker: Chunker
    embedder: Embedder | None
    retriever: Retriever
    topk: int
    rerankers: Sequence[Reranker]
    candidates: int
    expander: Expander
    generator: Generator
    judges: Mapping[str, Judge]


@dataclass(frozen=True)
class JobResult:
    """What a job produced: the tracker logs it, the terminal summarises it."""

    evalset: EvalSet
    tree: ChunkTree
    cases: tuple[CaseResult, ...]
    metrics: Mapping[str, float]
    fingerprints: Mapping[str, str]
    timings: Mapping[str, float]
    counts: Mapping[str, int]
    evidence: Mapping[str, EvidenceMap] = field(default_factory=dict)


def sha256_json(obj: Any) -> str:
    """SHA-256 of a canonical JSON rendering."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def index_fingerprint(tree: ChunkTree, embedder: Embedder | None, retriever: Retriever) -> str:
    """SHA-256 over searchable chunk ids and texts, embedder identity and index params (never top-k)."""
    h = hashlib.sha256()
    for c in tree.searchable():
        h.update(c.chunk_id.encode())
        h.update(b"\0")
        h.update(c.text.encode())
        h.update(b"\n")
    meta = {
        "schema": INDEX_SCHEMA,
        "embedder": embedder.identity if embedder is not None and retriever.needs_vectors else None,
        "retriever": dict(retriever.params()),
    }
    h.update(json.dumps(meta, sort_keys=True).encode())
    return h.hexdigest()


def metric_ks(topk: int) -> list[int]:
    """Cut-offs reported: 1, 3, 5 and the job's top-k."""
    return sorted({*BASE_KS, topk})


def _retrieval_scores(
    tree: ChunkTree, emap: EvidenceMap, hits: Sequence[Hit], ks: Sequence[int], topk: int
) -> dict[str, float]:
    if not emap.matched:
        return {}
    out: dict[str, float] = {}
    ranked = [h.chunk_id for h in hits]
    for key, value in retrieval_metrics(ranked, relevant_searchable(tree, emap), ks).items():
        out[f"retrieval/chunk/{key}"] = value
    for k in ks:
        units, qrels = unit_ranking(tree, emap, hits[:k])
        cut = max(len(units), 1)
        for key, value in retrieval_metrics(units, qrels, [cut]).items():
            if key == "mrr":
                continue
            name = key.rsplit("_at_", 1)[0]
            out[f"retrieval/{name}_at_{k}"] = value
    units, qrels = unit_ranking(tree, emap, hits)
    out["retrieval/mrr"] = retrieval_metrics(units, qrels, [max(len(units), 1)])["mrr"]
    texts = [t for t in emap.texts if t]
    rec = evidence_recall(texts, [tree[h.chunk_id].text for h in hits[:topk]])
    if rec is not None:
        out["retrieval/evidence_recall"] = rec
    return out


class Pipeline:
    """Runs one job's stages in order and times them."""

    def __init__(self, components: Components, *, progress: Progress | None = None) -> None:
        if components.topk < 1:
            raise ConfigError(f"retrieval.topk must be >= 1, got {components.topk}")
        self.c = components
        self.progress = progress or (lambda stage, done, total: None)
        self.timings: dict[str, float] = {}

    def _timed(self, stage: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        try:
            return fn()
        finally:
            self.timings[stage] = self.timings.get(stage, 0.0) + time.perf_counter() - start

    def run(self) -> JobResult:
        c = self.c
        evalset: EvalSet = self._timed("load", c.dataset.load)
        tree: ChunkTree = self._timed("chunk", lambda: c.chunker.chunk(evalset.documents))
        searchable = tree.searchable()
        ids = [ch.chunk_id for ch in searchable]
        texts = [ch.text for ch in searchable]
        needs_vectors = c.retriever.needs_vectors or any(r.needs_vectors for r in c.rerankers)
        if needs_vectors and c.embedder is None:
            raise ConfigError("this retriever/reranker needs an embedder; set embedder=minilm (or another)")
        vectors = None
        if needs_vectors:
            assert c.embedder is not None
            vectors = self._timed("embed", lambda: c.embedder.embed_documents(texts))
        self._timed("index", lambda: c.retriever.build(ids=ids, texts=texts, vectors=vectors))
        queries = list(evalset.queries)
        qtexts = [q.text for q in queries]
        qvecs = None
        if needs_vectors:
            assert c.embedder is not None
            qvecs = self._timed("embed_queries", lambda: c.embedder.embed_queries(qtexts))
        ks = metric_ks(c.topk)
        depth = max(max(ks), c.candidates if c.rerankers else 0)
        hits_all: list[list[Hit]] = self._timed(
            "search", lambda: c.retriever.search(texts=qtexts, vectors=qvecs, k=depth)
        )
        matcher = EvidenceMatcher(tree)
        emaps = self._timed("evidence", lambda: {q.qid: matcher.match(q) for q in queries})
        row_of = {cid: i for i, cid in enumerate(ids)}

        def one(i: int) -> CaseResult:
            return self._case(queries[i], hits_all[i], tree, emaps[queries[i].qid], ks,
                              None if qvecs is None else qvecs[i], vectors, row_of)

        cases: list[CaseResult] = []
        workers = max(1, int(getattr(c.generator, "max_concurrency", 1)))
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for n, case in enumerate(pool.map(one, range(len(queries))), start=1):
                cases.append(case)
                self.progress("cases", n, len(queries))
        self.timings["cases"] = time.perf_counter() - start
        metrics = aggregate(cases)
        search_s = self.timings.get("search", 0.0) + self.timings.get("embed_queries", 0.0)
        metrics["latency/search_mean_ms"] = 1000.0 * search_s / max(len(queries), 1)
        for key, value in match_stats(emaps).items():
            metrics[key] = float(value)
        counts = {
            "documents": len(evalset.documents),
            "chunks": len(tree.chunks),
            "searchable_chunks": len(searchable),
            "queries": len(queries),
            "failed_cases": sum(cs.failed for cs in cases),
            "embedded_texts": len(texts) if vectors is not None else 0,
        }
        fingerprints = {
            "dataset_sha256": evalset.fingerprint,
            "index_sha256": index_fingerprint(tree, c.embedder, c.retriever),
        }
        return JobResult(
            evalset=evalset, tree=tree, cases=tuple(cases), metrics=metrics, fingerprints=fingerprints,
            timings=dict(self.timings), counts=counts, evidence=emaps,
        )

    def _case(
        self,
        query: Query,
        hits: list[Hit],
        tree: ChunkTree,
        emap: EvidenceMap,
        ks: Sequence[int],
        qvec: np.ndarray | None,
        vectors: np.ndarray | None,
        row_of: Mapping[str, int],
    ) -> CaseResult:
        """One query: rerank, expand, generate, judge. Any exception marks the case failed, never lost."""
        c = self.c
        latency: dict[str, float] = {}
        scores: dict[str, float] = {}
        contexts: tuple = ()
        answer: Answer | None = None
        final = hits
        try:
            t = time.perf_counter()
            for reranker in c.rerankers:
                chunk_vecs = None
                if reranker.needs_vectors and vectors is not None:
                    chunk_vecs = {h.chunk_id: vectors[row_of[h.chunk_id]] for h in final}
                final = reranker.rerank(query, final, tree=tree, k=len(final),
                                        query_vector=qvec, chunk_vectors=chunk_vecs)
            if c.rerankers:
                latency["rerank"] = time.perf_counter() - t
            final = final[: max(ks)]
            scores.update(_retrieval_scores(tree, emap, final, ks, c.topk))
            t = time.perf_counter()
            contexts = tuple(c.expander.expand(final[: c.topk], tree))
            latency["expand"] = time.perf_counter() - t
            ctx_tokens = sum(count_tokens(x.text) for x in contexts)
            scores["context/tokens"] = float(ctx_tokens)
            ev_texts = [x for x in emap.texts if x]
            rec = evidence_recall(ev_texts, [x.text for x in contexts]) if emap.matched else None
            if rec is not None:
                scores["context/evidence_recall"] = rec
                if ctx_tokens:
                    scores["context/evidence_recall_per_1k_tokens"] = rec * 1000.0 / ctx_tokens
            t = time.perf_counter()
            answer = c.generator.answer(query, contexts)
            latency["generate"] = time.perf_counter() - t
            if answer.citations and emap.matched:
                cited = [n for n in answer.citations if 1 <= n <= len(contexts)]
                if cited:
                    scores["answer/citation_hit_rate"] = sum(
                        context_has_evidence(tree, emap, contexts[n - 1].chunk_id) for n in cited
                    ) / len(cited)
            t = time.perf_counter()
            for judge in c.judges.values():
                scores.update(judge.judge(query, contexts, answer))
            latency["judge"] = time.perf_counter() - t
        except Exception as exc:  # noqa: BLE001 - a case failure is recorded, counted and scored zero
            log.warning("case %s failed: %s: %s", query.qid, type(exc).__name__, exc)
            return CaseResult(
                query=query, hits=tuple(final), contexts=contexts, answer=answer, scores=scores,
                status="failed", error_type=type(exc).__name__, error=str(exc)[:500], latency=latency,
            )
        return CaseResult(query=query, hits=tuple(final), contexts=contexts, answer=answer, scores=scores,
                          latency=latency)
