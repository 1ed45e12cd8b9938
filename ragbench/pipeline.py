"""Stage order and timing: dataset -> chunks -> vectors -> index -> hits -> rerank -> contexts -> answer
-> verdicts. No component logic lives here, and no MLflow: the tracker gets the JobResult."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ragbench import interrupts
from ragbench.cache import keys
from ragbench.cache.entries import (
    check_index,
    index_fingerprint,
    library_versions,
    load_hits,
    load_vectors,
    save_hits,
    save_vectors,
    texts_digest,
    vectors_identity,
)
from ragbench.cache.store import StageCache, make_key
from ragbench.cases import CaseRunner, JobLookup
from ragbench.components import Components, JobResult
from ragbench.embed import shard_entries
from ragbench.embed.shard import EncodeShard, shard_of
from ragbench.errors import ConfigError, IndexMismatchError
from ragbench.evidence import Coverage, EvidenceMatcher
from ragbench.job_metrics import Produced, assemble, case_metrics, stage_metrics
from ragbench.judge.retrieval import metric_ks
from ragbench.llm.batch import job_batching, run_rounds
from ragbench.protocols import BaselineRetriever, FusedRetriever, LoadableEmbedder, OutsideRetriever
from ragbench.query.plan import plan_queries
from ragbench.retrieval.ann_recall import PREFIX as ANN_RECALL
from ragbench.retrieval.baselines import baseline_of
from ragbench.retrieval.batch import search_all, time_single
from ragbench.retrieval.batch import search_depth as batch_depth
from ragbench.retrieval.dense import FaissRetriever
from ragbench.retrieval.run_file import QueryBoundRetriever
from ragbench.retrieval.scope import DocumentScope
from ragbench.retrieval.vectors import SPILL_ROWS, encode_to_file
from ragbench.reuse import LAST
from ragbench.routing import max_topk
from ragbench.scopes import check_scope
from ragbench.stages import answer_stages
from ragbench.trace import branch_stages, child_rankings
from ragbench.types import CaseResult, ChunkTree, EvalSet, Hit, Level

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]
CaseSink = Callable[[CaseResult, JobLookup], None]  # each case as it finishes (the job's record)


class Pipeline:
    """Runs one job's stages in order, times them, and reuses what the stage cache holds."""

    def __init__(self, components: Components, *, cache: StageCache | None = None,
                 progress: Progress | None = None, on_case: CaseSink | None = None) -> None:
        if components.topk < 1:
            raise ConfigError(f"retrieval.topk must be >= 1, got {components.topk}")
        self.c = components
        self.cache = cache or StageCache(mode="off")
        self.progress = progress or (lambda stage, done, total: None)
        self.on_case = on_case or (lambda case, lookup: None)
        self.timings: dict[str, float] = {}
        self.embedded_texts = 0
        self.batch_ids: list[str] = []  # llm.batch: the provider batches that answered this job's cases

    def _timed(self, stage: str, fn: Callable[[], Any]) -> Any:
        """Adds the stage's time, less any one-off model loading inside it (timed as ``model_load``)."""
        interrupts.check()  # a safe point: between stages
        start = time.perf_counter()
        loading = self.timings.get("model_load", 0.0)
        try:
            return fn()
        finally:
            spent = time.perf_counter() - start
            if stage != "model_load":
                spent -= self.timings.get("model_load", 0.0) - loading
            self.timings[stage] = self.timings.get(stage, 0.0) + spent

    def _embed(self, texts: list[str], *, queries: bool) -> np.ndarray:
        """Vectors for ``texts``, each distinct text encoded once (11% of the LoCoMo sample's
        sentences repeat another one: "Thanks!", "Wow!"); ``embedded_texts`` counts what was encoded."""
        emb = self.c.embedder
        assert emb is not None
        if isinstance(emb, LoadableEmbedder) and not emb.loaded:
            self._timed("model_load", emb.load)  # kept out of the embed and search latencies
        distinct, rows = _distinct(texts)
        self.embedded_texts += 0 if queries else len(distinct)
        vecs = emb.embed_queries(distinct) if queries else emb.embed_documents(distinct)
        return vecs if len(distinct) == len(texts) else vecs[rows]

    def _index_entry(self, chunks_key: str, ids: list[str]) -> tuple[str, dict[str, Any]]:
        """The corpus vectors' cache key and the settings its manifest must hold."""
        emb = self.c.embedder
        assert emb is not None
        identity = vectors_identity(emb, self.c.parent_vectors)
        return keys.index_key(chunks_key, identity), {
            "embedder": identity, "chunks_key": chunks_key, "count": len(ids),
            "parent_vectors": self.c.parent_vectors, "libraries": library_versions()}

    def _vectors(self, chunks_key: str, tree: ChunkTree, ids: list[str], texts: list[str]) -> np.ndarray:
        """Corpus vectors, from the cache when this corpus was embedded by this embedder before (or encoded
        in shards by ``stages=encode`` jobs: assembled, nothing encoded)."""
        parents = self.c.parent_vectors
        key, expected = self._index_entry(chunks_key, ids)

        def load(folder: Path, manifest: Mapping[str, Any]) -> np.ndarray:
            check_index(manifest, expected, folder)
            stored_ids, vecs = load_vectors(folder)
            if stored_ids != ids:
                raise IndexMismatchError(f"the cached index at {folder} holds other chunk ids than this corpus; "
                                         "fix: rebuild it with cache.mode=refresh")
            return vecs

        def build() -> tuple[list[str], np.ndarray]:
            spill = self.cache.dir / "index" if self.cache.writes else None
            assembled = None if parents == "mean" else self._timed("embed", lambda: shard_entries.assemble(
                self.cache, index_key=key, expected=expected, ids=ids, spill_rows=SPILL_ROWS, spill=spill))
            if assembled is not None:
                return ids, assembled
            if parents != "mean" and len(texts) > SPILL_ROWS:  # written to disk block by block, memory-mapped
                return ids, self._timed("embed", lambda: encode_to_file(
                    lambda part: self._embed(list(part), queries=False), texts, spill, block=SPILL_ROWS))
            if parents != "mean":
                return ids, self._timed("embed", lambda: self._embed(texts, queries=False))
            # EasyRAG's propagation: a parent's vector is the normalised mean of its children's
            n = sum(1 for cid in ids if tree[cid].level == tree.search_level)
            child = self._timed("embed", lambda: self._embed(texts[:n], queries=False))
            row = {cid: i for i, cid in enumerate(ids[:n])}
            pooled = []
            for cid in ids[n:]:
                rows = [row[d.chunk_id] for d in tree.descendants(cid, tree.search_level) if d.chunk_id in row]
                vec = child[rows].mean(axis=0)
                pooled.append(vec / max(float(np.linalg.norm(vec)), 1e-12))
            parent = np.asarray(pooled, dtype=np.float32).reshape(len(pooled), child.shape[1])
            return ids, np.vstack([child, parent])

        value, _ = self.cache.folder(
            "index", key, {**expected, "dim": None},
            build=build, save=save_vectors, load=lambda f, m: (ids, load(f, m)),
        )
        return value[1]

    def _query_vectors(self, texts: list[str]) -> np.ndarray:
        emb = self.c.embedder
        assert emb is not None
        key = make_key({"stage": "query_vectors", "embedder": emb.identity, "queries": texts_digest(texts),
                        "libraries": library_versions()})
        value, _ = self.cache.folder(
            "query_vectors", key, {"embedder": emb.identity, "count": len(texts)},
            build=lambda: ([str(i) for i in range(len(texts))],
                           self._timed("embed_queries", lambda: self._embed(texts, queries=True))),
            save=save_vectors, load=lambda f, m: load_vectors(f),
        )
        return value[1]

    def run(self) -> JobResult:
        c = self.c
        evalset: EvalSet = self._timed("load", c.dataset.load)
        c = self.c = answer_stages(c, evalset.queries)  # no gold answers: retrieval only; some missing: refused
        chunker = (type(c.chunker).__module__, type(c.chunker).__qualname__, repr(sorted(c.chunker.params().items())))
        tree: ChunkTree = self._timed("chunk", lambda: LAST.get(
            "chunks", chunker, (evalset.documents,), lambda: c.chunker.chunk(evalset.documents)))
        tree = searched_tree(tree, c.parent_vectors)
        chunks_key = keys.chunks_key(evalset.documents, c.chunker)
        self.cache.keys["chunks"] = chunks_key
        searchable = tree.searchable()
        ids = [ch.chunk_id for ch in searchable]
        texts = [ch.text for ch in searchable]
        retriever_vectors = c.retriever.needs_vectors
        reranker_vectors = any(r.needs_vectors for r in c.rerankers)
        if (retriever_vectors or reranker_vectors) and c.embedder is None:
            raise ConfigError("this retriever/reranker needs an embedder; set embedder=minilm (or another)")
        shard = shard_of(c.embedder)
        if shard is not None:  # stages=encode: one slice of the corpus vectors into the cache, nothing searched
            return self._encode_shard(shard, evalset, tree, chunks_key, ids, texts)
        queries = list(evalset.queries)
        if isinstance(c.retriever, QueryBoundRetriever):  # retrieval=run_file: its rankings are keyed by question id
            c.retriever.bind(queries)
        outside = isinstance(c.retriever, OutsideRetriever)  # system=...: an outside system's contexts per question
        if isinstance(c.retriever, OutsideRetriever):
            c.retriever.attach(queries, tree)
        plan = self._timed("query", lambda: plan_queries(c.query, queries, k_rrf=c.query_k_rrf,
                                                         workers=c.query.max_concurrency))
        qtexts = plan.texts  # the questions themselves under query=none: keys and results unchanged
        owners = plan.owners(queries)
        ks = metric_ks(c.topk)
        needed = needed_depth(c)
        depth = search_depth(c)  # one depth for every top-k of a sweep (hits are cut back to `needed`)
        scoped = DocumentScope(c.retriever) if check_scope(c.scope) == "document" else None
        index_fp = index_fingerprint(tree, c.embedder, c.retriever, scope=c.scope, parent_vectors=c.parent_vectors)
        vectors = qvecs = None

        def search() -> list[list[Hit]]:
            nonlocal vectors, qvecs
            if retriever_vectors:
                vectors = self._vectors(chunks_key, tree, ids, texts)
                qvecs = self._query_vectors(qtexts)
                searched["embedding_dim"] = int(vectors.shape[1])  # kept in the entry's manifest (written after)
            if scoped is None:
                self._timed("index", lambda: c.retriever.build(ids=ids, texts=texts, vectors=vectors))
            else:  # sub-indexes are built per document on first use: their time counts as search
                scoped.build(ids=ids, texts=texts, vectors=vectors, doc_of=[tree[i].doc_id for i in ids])
            found, seconds = self._timed("search", lambda: search_all(c.retriever, qtexts, qvecs, depth, scoped,
                                                                      owners))
            if isinstance(c.retriever, FaissRetriever) and scoped is None and qvecs is not None:
                # every depth: the jobs of a top-k sweep share this entry and report their own cut-offs
                searched["ann_recall"] = c.retriever.ann_recall(vectors=qvecs, hits=found, ks=range(1, depth + 1))
            search_s.extend(seconds)
            single_s.extend(time_single(c.retriever, qtexts, qvecs, needed, scoped, owners))
            return found

        def cached_hits(folder: Path, manifest: Mapping[str, Any]) -> list[list[Hit]]:
            # the vectors' width, as recorded by the search that made these hits (no vectors are loaded)
            if isinstance(manifest.get("embedding_dim"), int):
                searched["embedding_dim"] = int(manifest["embedding_dim"])
            if isinstance(manifest.get("ann_recall"), dict):  # measured by the search that made these hits
                searched["ann_recall"] = {str(k): float(v) for k, v in manifest["ann_recall"].items()}
            return load_hits(folder)

        search_s: list[float] = []  # per-text share of its batch's search time (empty when cached)
        single_s: list[float] = []  # a sample of queries searched one at a time
        searched: dict[str, Any] = {"index": index_fp, "k": depth}  # the retrieval entry's manifest
        retrieval_key = keys.retrieval_key(index_fp, qtexts, depth)
        baseline = baseline_of(c.retriever)  # retrieval=none | oracle: no index, hits set from the evidence
        hits_flat: list[list[Hit]] = [[] for _ in qtexts] if baseline else search() if outside else self.cache.folder(
            "retrieval", retrieval_key, searched, build=search, save=save_hits, load=cached_hits)[0]
        hits_flat = [hits[:needed] for hits in hits_flat]  # exactly a search at depth `needed`
        hits_all, votes_all = plan.fuse(hits_flat, needed)
        children: list[list[Any]] = []
        if c.trace and isinstance(c.retriever, FusedRetriever) and c.retriever.children:  # each child's ranking: rebuilt (small runs)
            if retriever_vectors and (vectors is None or qvecs is None):
                vectors, qvecs = self._vectors(chunks_key, tree, ids, texts), self._query_vectors(qtexts)
            if scoped is None:
                c.retriever.build(ids=ids, texts=texts, vectors=vectors)
            else:
                scoped.build(ids=ids, texts=texts, vectors=vectors, doc_of=[tree[i].doc_id for i in ids])
            children = child_rankings(c.retriever, scoped, qtexts, qvecs, owners, needed)
        starts = plan.starts
        if search_s:  # a question's search latency: the sum over its variants
            search_s = [sum(search_s[s: s + len(v)]) for s, v in zip(starts, plan.variants, strict=True)]
        if reranker_vectors and vectors is None:
            vectors = self._vectors(chunks_key, tree, ids, texts)
            qvecs = self._query_vectors(qtexts)
        emaps = self._timed("evidence", lambda: LAST.get(
            "evidence", "evidence", (tree, evalset.queries),
            lambda: {q.qid: m.match(q) for m in [EvidenceMatcher(tree)] for q in queries}))
        if baseline:
            assert isinstance(c.retriever, BaselineRetriever)
            hits_all = [c.retriever.hits_for(emaps[q.qid]) for q in queries]
        row_of = {cid: i for i, cid in enumerate(ids)}
        coverage = LAST.get("coverage", "coverage", (tree, emaps),
                            lambda: {qid: Coverage(tree, m) for qid, m in emaps.items()})

        cases_runner = CaseRunner(self.c, self.cache)
        lookup = JobLookup(tree=tree, evidence=emaps, ks=ks, vectors=vectors, row_of=row_of, coverage=coverage,
                           dataset=evalset.name)

        def one(i: int) -> CaseResult:
            return cases_runner.run(queries[i], hits_all[i], lookup,
                                    qvec=None if qvecs is None else qvecs[starts[i]],
                                    search_s=search_s[i] if search_s else None, votes=votes_all[i],
                                    stages=branch_stages(plan.rankings(hits_flat, i),
                                                         children[starts[i]: starts[i] + len(plan.variants[i])])
                                    if c.trace else ())

        cases: list[CaseResult] = []
        workers = 1 if c.generator is None else max(1, int(c.generator.max_concurrency))
        start = time.perf_counter()
        batching = job_batching(c.generator, c.judges.values())  # llm.batch=true: rounds of provider batches
        # one worker (no generator, or max_concurrency=1): the cases run in this thread, without a future per case
        pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 and batching is None else None
        with pool or nullcontext():
            try:
                done = (run_rounds(batching, one, len(queries), workers=workers) if batching is not None
                        else (pool.map if pool else map)(one, range(len(queries))))
                self.batch_ids = batching.batch_ids if batching is not None else []
                for n, case in enumerate(done, start=1):
                    cases.append(case)
                    self.on_case(case, lookup)
                    self.progress("cases", n, len(queries))
                    interrupts.check()  # a safe point: between cases
            except BaseException:
                if pool is not None:  # the cases not started yet are dropped, not run
                    pool.shutdown(wait=True, cancel_futures=True)
                raise
        self.timings["cases"] = time.perf_counter() - start
        metrics = assemble(case_metrics(cases, c.judges.values()), stage_metrics(
            timings=self.timings, queries=queries, single_s=single_s, evidence=emaps,
            cache_counters=self.cache.counters(), embedded_texts=self.embedded_texts, scoped=scoped is not None,
            cases=cases, transform_failures=c.query.failures,
            model_loaded=isinstance(c.embedder, LoadableEmbedder) and c.embedder.loaded),
            Produced("index", {key: v for key, v in (searched.get("ann_recall") or {}).items()
                               if key.removeprefix(ANN_RECALL) in {str(k) for k in ks}}))
        counts = {
            "documents": len(evalset.documents),
            "chunks": len(tree.chunks),
            "searchable_chunks": len(searchable),
            "queries": len(queries),
            "failed_cases": sum(cs.failed for cs in cases),
            "embedded_texts": self.embedded_texts,
            **({"embedding_dim": int(vectors.shape[1])} if vectors is not None
               else {"embedding_dim": searched["embedding_dim"]} if "embedding_dim" in searched else {}),
        }
        fingerprints = {"dataset_sha256": evalset.fingerprint, "index_sha256": index_fp}
        return JobResult(
            evalset=evalset, tree=tree, cases=tuple(cases), metrics=metrics, fingerprints=fingerprints,
            timings=dict(self.timings), counts=counts, evidence=emaps, cache_keys=dict(self.cache.keys),
            coverage=coverage,
        )


    def _encode_shard(self, shard: EncodeShard, evalset: EvalSet, tree: ChunkTree, chunks_key: str, ids: list[str],
                      texts: list[str]) -> JobResult:
        """``stages=encode``: shard ``shard`` of the corpus vectors into the stage cache (ragbench.embed.shard_entries)."""
        key, expected = self._index_entry(chunks_key, ids)
        stored = self._timed("embed", lambda: shard_entries.store_shard(
            self.cache, index_key=key, expected=expected, shard=shard, ids=ids, texts=texts, spill_rows=SPILL_ROWS,
            encode=lambda part: self._embed(list(part), queries=False)))
        emb = self.c.embedder
        metrics = assemble(Produced("stages", {**self.cache.counters(), "ingest/embedded_texts": float(
            self.embedded_texts), "ingest/model_loaded": float(isinstance(emb, LoadableEmbedder) and emb.loaded)}))
        counts = {"documents": len(evalset.documents), "chunks": len(tree.chunks), "searchable_chunks": len(ids),
                  "embedded_texts": self.embedded_texts, "shard_rows": len(stored.rows),
                  **({"embedding_dim": stored.dim} if stored.dim else {})}
        return JobResult(evalset=evalset, tree=tree, cases=(), metrics=metrics,
                         fingerprints={"dataset_sha256": evalset.fingerprint, "index_sha256": index_fingerprint(
                             tree, emb, self.c.retriever, scope=self.c.scope, parent_vectors=self.c.parent_vectors)},
                         timings=dict(self.timings),
                         counts=counts, cache_keys=dict(self.cache.keys))


def searched_tree(tree: ChunkTree, parent_vectors: str) -> ChunkTree:
    """The tree as searched: with ``retrieval.parent_vectors`` the parents are searched too."""
    if parent_vectors != "none":
        return replace(tree, also_searched=(Level(tree.search_level + 1),))
    return tree


def needed_depth(c: Components) -> int:
    """How many hits each query needs: the largest metric k, the rerankers' candidates, or the largest
    routed top-k."""
    return max(max(metric_ks(c.topk)), c.candidates if c.rerankers else 0, max_topk(c.routes))


def search_depth(c: Components) -> int:
    """How deep each query is searched: ``needed_depth``, raised to ``retrieval.search_depth`` where the
    retriever keeps that exact, so the jobs of a top-k sweep share one search (ragbench.retrieval.batch)."""
    return batch_depth(c.retriever, needed_depth(c), c.search_depth)


def _distinct(texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The distinct texts in first-seen order, and for each text the row of its distinct copy."""
    first: dict[str, int] = {}
    rows = np.fromiter((first.setdefault(t, len(first)) for t in texts), dtype=np.int64, count=len(texts))
    return list(first), rows
