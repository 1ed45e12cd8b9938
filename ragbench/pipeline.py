"""A job's waves, in order and timed: load -> chunk -> index -> search all queries -> expand all (rerank,
contexts) -> generate all (batched per model) -> judge all (batched per judge model) -> score. Each wave
runs every case's step (ragbench.cases) before the next starts; no component logic lives here, and no
MLflow: the tracker gets the JobResult."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import count
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ragbench import interrupts
from ragbench.cache import documents as doc_pieces
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
from ragbench.cases import Case, CaseRunner, JobLookup
from ragbench.components import Components, JobResult
from ragbench.embed import shard_entries
from ragbench.embed.shard import EncodeShard, shard_of
from ragbench.errors import ConfigError, IndexMismatchError
from ragbench.evidence import Coverage, EvidenceMatcher
from ragbench.generate.history import rounds as history_rounds
from ragbench.job_metrics import Produced, assemble, case_metrics, stage_metrics
from ragbench.judge.hops import HopInput
from ragbench.judge.retrieval import metric_ks
from ragbench.llm.wave import Wave, job_wave
from ragbench.protocols import (
    ApproximateRetriever,
    BaselineRetriever,
    FusedRetriever,
    LoadableEmbedder,
    OutsideRetriever,
    QueryBound,
    TrajectoryRetriever,
)
from ragbench.query.multistep import StepResult, first_hops, records_hops, run_step
from ragbench.query.plan import QueryPlan, plan_queries
from ragbench.query.routed import Decision, routed_step, routed_transform
from ragbench.repeat_cases import run_repeats
from ragbench.repeats import repeat_metrics
from ragbench.retrieval.ann_recall import PREFIX as ANN_RECALL
from ragbench.retrieval.baselines import baseline_of
from ragbench.retrieval.batch import search_all, time_single
from ragbench.retrieval.batch import search_depth as batch_depth
from ragbench.retrieval.scope import DocumentScope
from ragbench.retrieval.vectors import SPILL_ROWS, encode_to_file
from ragbench.reuse import LAST
from ragbench.routing import max_topk
from ragbench.scopes import check_scope
from ragbench.stages import answer_stages
from ragbench.trace import branch_stages, child_rankings
from ragbench.types import CaseResult, ChunkTree, Document, EvalSet, Hit, Level, Query

log = logging.getLogger(__name__)
T = TypeVar("T")

Progress = Callable[[str, int, int], None]
CaseSink = Callable[[CaseResult, JobLookup], None]  # each case as it finishes (the job's record)


@dataclass(frozen=True)
class Corpus:
    """The chunk wave's output: the chunk tree as searched, its cache key, the searchable chunks."""

    tree: ChunkTree
    key: str
    ids: list[str]
    texts: list[str]


@dataclass
class Found:
    """The search wave's output: every query text's hits (``flat``, cut to ``needed``), the vectors it
    used, and what it measured (``manifest``: the retrieval entry's, with the ANN recall)."""

    needed: int
    index_fp: str
    scoped: DocumentScope | None
    manifest: dict[str, Any]
    flat: list[list[Hit]] = field(default_factory=list)
    vectors: np.ndarray | None = None
    qvecs: np.ndarray | None = None
    search_s: list[float] = field(default_factory=list)  # per question (empty when cached)
    single_s: list[float] = field(default_factory=list)  # a sample of queries searched one at a time
    children: list[list[Any]] = field(default_factory=list)  # trace=true: each child retriever's rankings
    text_s: list[float] = field(default_factory=list)  # per searched text (search_s is per question)
    built: bool = False  # the retriever's index is built in this process (a cached search builds none)

    def stages(self, plan: QueryPlan, i: int) -> list[tuple[str, Sequence[Hit]]]:
        """Question ``i``'s rankings before fusion: per variant and child retriever (ragbench.trace)."""
        start = plan.starts[i]
        return branch_stages(plan.rankings(self.flat, i), self.children[start: start + len(plan.variants[i])])


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
        self.documents: Sequence[Document] = ()  # the corpus's: its per-document index pieces (_vectors)
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
        manifest = {**expected, "dim": None}  # + the documents an index assembled from pieces holds

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
                return ids, self._timed("embed", lambda: doc_pieces.assemble(  # re-encodes only changed documents
                    self.cache, tree=tree, ids=ids, texts=texts, documents=self.documents,
                    chunker=self.c.chunker.params(), vectors=expected["embedder"],
                    dataset=str(getattr(self.c.dataset, "name", "dataset")),
                    encode=lambda part: self._embed(part, queries=False), index_manifest=manifest))
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
            "index", key, manifest,
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
        """The job's waves: load -> chunk -> index -> search all queries -> expand all -> generate all
        (batched per model) -> judge all (batched per judge model) -> score."""
        evalset: EvalSet = self._timed("load", self.c.dataset.load)
        c = self.c = answer_stages(self.c, evalset.queries)  # no gold answers: retrieval only; some missing: refused
        corpus = self._chunk(evalset)
        if (c.retriever.needs_vectors or any(r.needs_vectors for r in c.rerankers)) and c.embedder is None:
            raise ConfigError("this retriever/reranker needs an embedder; set embedder=minilm (or another)")
        shard = shard_of(c.embedder)
        if shard is not None:  # stages=encode: one slice of the corpus vectors into the cache, nothing searched
            return self._encode_shard(shard, evalset, corpus)
        queries = list(evalset.queries)
        if isinstance(c.retriever, QueryBound):  # a run file's rankings, an outside system's contexts
            c.retriever.prepare(queries, corpus.tree)
        router = c.router  # routing by a classifier, or to decompose/iterative: a route per question
        routed = self._timed("route", lambda: router.decide(queries)) if router else {}  # ragbench.routing
        transform = routed_transform(c.query, router, routed)  # decompose routes: their questions split
        plan = self._timed("query", lambda: plan_queries(transform, queries, k_rrf=c.query_k_rrf,
                                                         workers=transform.max_concurrency))
        found = self._search(corpus, plan, queries)  # index and search: every query text
        hits, votes = plan.fuse(found.flat, found.needed)
        emaps = self._timed("evidence", lambda: LAST.get(
            "evidence", "evidence", (corpus.tree, evalset.queries),
            lambda: {q.qid: m.match(q) for m in [EvidenceMatcher(corpus.tree)] for q in queries}))
        if baseline_of(c.retriever):  # retrieval=none | oracle: hits set from the evidence
            assert isinstance(c.retriever, BaselineRetriever)
            hits = [c.retriever.hits_for(emaps[q.qid]) for q in queries]
        lookup = JobLookup(tree=corpus.tree, evidence=emaps, ks=metric_ks(c.topk), vectors=found.vectors,
                           row_of={cid: i for i, cid in enumerate(corpus.ids)}, dataset=evalset.name,
                           coverage=LAST.get("coverage", "coverage", (corpus.tree, emaps),
                                             lambda: {qid: Coverage(corpus.tree, m) for qid, m in emaps.items()}))
        runner = CaseRunner(c, self.cache)
        wave = job_wave(c.generator, c.judges.values())  # llm.batch / a local model: each wave batched
        start = time.perf_counter()
        hops, decided = self._multistep(corpus, found, plan, queries, hits, wave, transform, routed)
        cases = self._wave("expand", wave, (), [partial(
            runner.expand, q, hits[i], lookup, qvec=None if found.qvecs is None else found.qvecs[plan.starts[i]],
            search_s=found.search_s[i] if found.search_s else None, votes=votes[i],
            stages=found.stages(plan, i) if c.trace else (), hops=None if hops is None else hops[i],
            adaptive=decided[i], route=routed.get(q.qid)) for i, q in enumerate(queries)])
        if c.repeats.on:  # repeats=N: generate and judge once per repeat, then each case merged (its record)
            results = run_repeats(c.repeats, runner, cases, partial(self._generate_rounds, wave, runner),
                                  lambda name, parts, steps: self._wave(name, wave, parts, steps),
                                  list(c.judges.values()))
            for case in results:
                self.on_case(case, lookup)
        else:
            cases = self._generate_rounds(wave, runner, cases)  # generate.history=own: turn after turn
            results = self._wave("judge", wave, c.judges.values(), [partial(runner.finish, x) for x in cases],
                                 then=in_order(lambda case: self.on_case(case, lookup)))  # each case as it finishes
        self.timings["cases"] = time.perf_counter() - start
        self.batch_ids = wave.batch_ids if wave is not None else []
        return self._result(evalset, corpus, found, results, lookup)

    def _multistep(self, corpus: Corpus, found: Found, plan: QueryPlan, queries: Sequence[Query],
                   hits: list[list[Hit]], wave: Wave | None, transform: Any, routed: Mapping[str, Decision],
                   ) -> tuple[list[list[HopInput]] | None, list[dict[str, Any] | None]]:
        """Each case's hops (None when the job records none) and adaptive decision; under
        ``retrieval.mode=iterative|adaptive`` (or a route to iterative: ``routed``) the ``iterate`` wave,
        which replaces ``hits`` in place."""
        c = self.c
        decided: list[dict[str, Any] | None] = [None] * len(queries)
        trails = ([c.retriever.trajectory(q.qid) for q in queries] if isinstance(c.retriever, TrajectoryRetriever)
                  else [])  # an outside agent's retrieval steps: its hops
        if not records_hops(c.multistep, transform, queries) and not any(trails) and c.router is None:
            return None, decided
        hops = first_hops(plan, found.flat, hits, transform, queries, found.text_s)
        for i, trail in enumerate(trails):
            if trail:
                hops[i] = [HopInput(text, list(ranked), source="trajectory") for text, ranked in trail]
        steps_of = {i: s for i, q in enumerate(queries)
                    if (s := routed_step(c.multistep, routed.get(q.qid))).mode != "single"}
        if not steps_of:
            return hops, decided
        client = getattr(c.generator, "client", None)  # the generator's model writes the next queries
        if any(s.asks for s in steps_of.values()) and client is None:
            mode = next(s.mode for s in steps_of.values() if s.asks)
            raise ConfigError(f"retrieval.mode={mode} asks the generator's model for each hop (the job's mode, or "
                              "a route's: routing.routes), but this job has no LLM generator; fix: set llm=local "
                              "(or another LLM), or retrieval.adaptive_threshold for adaptive mode")
        search, tree = self._hop_search(corpus, found), corpus.tree
        steps: list[Callable[[], StepResult]] = [
            partial(run_step, s, queries[i], hops[i], client, search, lambda cid: tree[cid].text, merge=plan.merge,
                    k_rrf=plan.k_rrf, k=found.needed, topk=c.topk) for i, s in steps_of.items()]
        done = self._timed("iterate", lambda: self._wave("iterate", wave, [c.generator], steps))
        for i, res in zip(steps_of, done, strict=True):
            hits[i], hops[i] = res.hits, res.hops
            decided[i] = res.adaptive if not res.error else {**(res.adaptive or {}), "error": res.error}
        return hops, decided

    def _hop_search(self, corpus: Corpus, found: Found) -> Callable[[str, Query], tuple[list[Hit], float]]:
        """A search of one text for one question, from a step's thread: the index built once if the search
        wave read its hits from the cache, one text at a time (a lock: one encoder, one index)."""
        c, lock = self.c, threading.Lock()

        def search(text: str, query: Query) -> tuple[list[Hit], float]:
            with lock:
                if not found.built:
                    vecs = (self._vectors(corpus.key, corpus.tree, corpus.ids, corpus.texts)
                            if c.retriever.needs_vectors else None)
                    if found.scoped is None:
                        c.retriever.build(ids=corpus.ids, texts=corpus.texts, vectors=vecs)
                    else:
                        found.scoped.build(ids=corpus.ids, texts=corpus.texts, vectors=vecs,
                                           doc_of=[corpus.tree[i].doc_id for i in corpus.ids])
                    found.built = True
                start = time.perf_counter()
                qvec = self._embed([text], queries=True) if c.retriever.needs_vectors else None
                hits, _ = search_all(c.retriever, [text], qvec, found.needed, found.scoped, [query])
                return hits[0], time.perf_counter() - start

        return search

    def _generate_rounds(self, wave: Wave | None, runner: CaseRunner, cases: list[Case]) -> list[Case]:
        """The generate wave; under ``generate.history=own`` one wave per turn position, so that each turn
        of a conversation is answered after its earlier turns (``ragbench.generate.history.rounds``)."""
        out = list(cases)
        for idx in history_rounds(self.c.history, [x.query for x in cases]):
            done = self._wave("generate", wave, [self.c.generator], [partial(runner.generate, cases[i]) for i in idx])
            for i, case in zip(idx, done, strict=True):
                out[i] = case
        return out

    def _wave(self, name: str, wave: Wave | None, components: Iterable[Any], steps: list[Callable[[], T]],
              then: Callable[[int, T], None] | None = None) -> list[T]:
        """One wave: every case's step. A batched wave (``wave``) runs each step in a thread of its own and
        sends the requests it gathers as one batch per model (ragbench.llm.wave); else the steps run in a
        pool of the generator's ``max_concurrency``. Each step done is progress, ``then``'s, and a safe point."""
        def done(i: int, result: T) -> None:
            self.progress(name, next(finished), len(steps))
            if then is not None:
                then(i, result)
            interrupts.check()  # a safe point: between cases

        finished = count(1)
        interrupts.check()  # a safe point: between waves
        log.debug("wave %s: %d cases", name, len(steps))
        workers = 1 if self.c.generator is None else max(1, int(self.c.generator.max_concurrency))
        clients = [getattr(x, "client", None) for x in components]
        if wave is not None and any(wave.defers(x) for x in clients if x is not None):
            with wave.serving(clients):
                return wave.run(steps, done, workers=workers)
        return run_pooled(steps, workers, done)

    def _chunk(self, evalset: EvalSet) -> Corpus:
        """The chunk wave: the corpus's chunk tree (as searched) and its searchable chunks."""
        c = self.c
        chunker = (type(c.chunker).__module__, type(c.chunker).__qualname__, repr(sorted(c.chunker.params().items())))
        tree: ChunkTree = self._timed("chunk", lambda: LAST.get(
            "chunks", chunker, (evalset.documents,), lambda: c.chunker.chunk(evalset.documents)))
        tree = searched_tree(tree, c.parent_vectors)
        key = self.cache.keys["chunks"] = keys.chunks_key(evalset.documents, c.chunker)
        self.documents = evalset.documents
        searchable = tree.searchable()
        return Corpus(tree, key, [ch.chunk_id for ch in searchable], [ch.text for ch in searchable])

    def _search(self, corpus: Corpus, plan: QueryPlan, queries: Sequence[Query]) -> Found:
        """The index and search waves: every query text searched once, ``search_depth`` deep (from the
        retrieval cache when this index answered these texts before), cut back to ``needed_depth``."""
        c, tree, ids, texts = self.c, corpus.tree, corpus.ids, corpus.texts
        qtexts, owners = plan.texts, plan.owners(queries)  # the questions themselves under query=none
        needed, depth = needed_depth(c), search_depth(c)  # one depth for every top-k of a sweep
        scoped = DocumentScope(c.retriever) if check_scope(c.scope) == "document" else None
        index_fp = index_fingerprint(tree, c.embedder, c.retriever, scope=c.scope, parent_vectors=c.parent_vectors)
        found = Found(needed=needed, index_fp=index_fp, scoped=scoped, manifest={"index": index_fp, "k": depth})

        def vectors() -> np.ndarray:  # the corpus's and the query texts' vectors, once
            if found.vectors is None:
                found.vectors, found.qvecs = self._vectors(corpus.key, tree, ids, texts), self._query_vectors(qtexts)
            return found.vectors

        def build() -> None:
            found.built = True
            if scoped is None:
                c.retriever.build(ids=ids, texts=texts, vectors=found.vectors)
            else:  # sub-indexes are built per document on first use: their time counts as search
                scoped.build(ids=ids, texts=texts, vectors=found.vectors, doc_of=[tree[i].doc_id for i in ids])

        def search() -> list[list[Hit]]:
            if c.retriever.needs_vectors:  # the width is kept in the entry's manifest (written after)
                found.manifest["embedding_dim"] = int(vectors().shape[1])
            self._timed("index", build) if scoped is None else build()
            hits, seconds = self._timed("search", lambda: search_all(c.retriever, qtexts, found.qvecs, depth,
                                                                     scoped, owners))
            if isinstance(c.retriever, ApproximateRetriever) and scoped is None and found.qvecs is not None:
                # every depth: the jobs of a top-k sweep share this entry and report their own cut-offs
                found.manifest["ann_recall"] = c.retriever.ann_recall(vectors=found.qvecs, hits=hits,
                                                                      ks=range(1, depth + 1))
            found.search_s.extend(seconds)
            found.single_s.extend(time_single(c.retriever, qtexts, found.qvecs, needed, scoped, owners))
            return hits

        def cached(folder: Path, manifest: Mapping[str, Any]) -> list[list[Hit]]:
            # the vectors' width and the ANN recall, as recorded by the search that made these hits
            if isinstance(manifest.get("embedding_dim"), int):
                found.manifest["embedding_dim"] = int(manifest["embedding_dim"])
            if isinstance(manifest.get("ann_recall"), dict):
                found.manifest["ann_recall"] = {str(k): float(v) for k, v in manifest["ann_recall"].items()}
            return load_hits(folder)

        if baseline_of(c.retriever):  # no index: hits set from the evidence (run)
            flat: list[list[Hit]] = [[] for _ in qtexts]
        elif isinstance(c.retriever, OutsideRetriever):  # an outside system's hits: not kept in the cache
            flat = search()
        else:
            flat = self.cache.folder("retrieval", keys.retrieval_key(index_fp, qtexts, depth), found.manifest,
                                     build=search, save=save_hits, load=cached)[0]
        found.flat = [hits[:needed] for hits in flat]  # exactly a search at depth `needed`
        if c.trace and isinstance(c.retriever, FusedRetriever) and c.retriever.children:  # each child's ranking
            if c.retriever.needs_vectors:
                vectors()
            build()  # rebuilt (small runs)
            found.children = child_rankings(c.retriever, scoped, qtexts, found.qvecs, owners, needed)
        found.text_s = list(found.search_s)
        if found.search_s:  # a question's search latency: the sum over its variants
            found.search_s = [sum(found.search_s[s: s + len(v)]) for s, v in zip(plan.starts, plan.variants,
                                                                                   strict=True)]
        if any(r.needs_vectors for r in c.rerankers):
            vectors()
        return found

    def _result(self, evalset: EvalSet, corpus: Corpus, found: Found, cases: list[CaseResult],
                lookup: JobLookup) -> JobResult:
        """The score wave: the job's metrics, counts and fingerprints."""
        c, ks, vectors = self.c, lookup.ks, found.vectors
        metrics = assemble(case_metrics(cases, c.judges.values()), Produced("repeats", repeat_metrics(
            [[r["scores"] for r in x.repeats] for x in cases if x.repeats and x.status == "ok"], c.repeats.n)),
            stage_metrics(
            timings=self.timings, queries=list(evalset.queries), single_s=found.single_s, evidence=lookup.evidence,
            cache_counters=self.cache.counters(), embedded_texts=self.embedded_texts,
            scoped=found.scoped is not None, cases=cases, transform_failures=c.query.failures + (
                c.router.decomposer.failures if c.router and c.router.decomposer else 0),
            model_loaded=isinstance(c.embedder, LoadableEmbedder) and c.embedder.loaded),
            Produced("index", {key: v for key, v in (found.manifest.get("ann_recall") or {}).items()
                               if key.removeprefix(ANN_RECALL) in {str(k) for k in ks}}))
        dim = int(vectors.shape[1]) if vectors is not None else found.manifest.get("embedding_dim")
        counts = {"documents": len(evalset.documents), "chunks": len(corpus.tree.chunks),
                  "searchable_chunks": len(corpus.ids), "queries": len(cases),
                  "failed_cases": sum(cs.failed for cs in cases), "embedded_texts": self.embedded_texts,
                  **({"embedding_dim": dim} if dim is not None else {})}
        return JobResult(
            evalset=evalset, tree=corpus.tree, cases=tuple(cases), metrics=metrics, timings=dict(self.timings),
            fingerprints={"dataset_sha256": evalset.fingerprint, "index_sha256": found.index_fp}, counts=counts,
            evidence=lookup.evidence, cache_keys=dict(self.cache.keys), coverage=lookup.coverage)

    def _encode_shard(self, shard: EncodeShard, evalset: EvalSet, corpus: Corpus) -> JobResult:
        """``stages=encode``: shard ``shard`` of the corpus vectors into the stage cache (ragbench.embed.shard_entries)."""
        ids, texts, tree = corpus.ids, corpus.texts, corpus.tree
        key, expected = self._index_entry(corpus.key, ids)
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


def run_pooled(steps: Sequence[Callable[[], T]], workers: int, done: Callable[[int, T], None]) -> list[T]:
    """Runs ``steps`` in a pool of ``workers`` threads (one: in this thread), ``done`` with each result
    in order; on an error (an interrupt at ``done``) the steps not started yet are dropped, not run."""
    pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 else None
    results: list[T] = []
    with pool or nullcontext():
        try:
            for i, result in enumerate(pool.map(lambda step: step(), steps) if pool else (s() for s in steps)):
                results.append(result)
                done(i, result)
        except BaseException:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
            raise
    return results


def in_order(emit: Callable[[T], None]) -> Callable[[int, T], None]:
    """A ``done`` callback that passes results to ``emit`` in step order (a wave's steps end in any order)."""
    ready: dict[int, T] = {}
    upcoming = 0

    def take(i: int, result: T) -> None:
        nonlocal upcoming
        ready[i] = result
        while upcoming in ready:
            emit(ready.pop(upcoming))
            upcoming += 1

    return take


def searched_tree(tree: ChunkTree, parent_vectors: str) -> ChunkTree:
    """The tree as searched: with ``retrieval.parent_vectors`` the parents are searched too."""
    if parent_vectors != "none":
        return replace(tree, also_searched=(Level(tree.search_level + 1),))
    return tree


def needed_depth(c: Components) -> int:
    """How many hits each query needs: the largest metric k, the rerankers' candidates, or the largest
    routed top-k."""
    return max(max(metric_ks(c.topk)), c.candidates if c.rerankers else 0, max_topk(c.routes),
               max_topk(c.router.routes) if c.router else 0)


def search_depth(c: Components) -> int:
    """How deep each query is searched: ``needed_depth``, raised to ``retrieval.search_depth`` where the
    retriever keeps that exact, so the jobs of a top-k sweep share one search (ragbench.retrieval.batch)."""
    return batch_depth(c.retriever, needed_depth(c), c.search_depth)


def _distinct(texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The distinct texts in first-seen order, and for each text the row of its distinct copy."""
    first: dict[str, int] = {}
    rows = np.fromiter((first.setdefault(t, len(first)) for t in texts), dtype=np.int64, count=len(texts))
    return list(first), rows
