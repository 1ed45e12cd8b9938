"""One case's steps after retrieval, one per wave: rerank and expand, generate, judge; answers and verdicts
cached."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ragbench import repeats
from ragbench.cache import keys
from ragbench.cache.entries import VERDICT_NOTES, answer_from, answer_record, verdict_with_notes
from ragbench.cache.store import StageCache
from ragbench.components import Components
from ragbench.errors import BudgetExhaustedError, CacheCorruptError
from ragbench.evidence import Coverage, EvidenceMap, context_has_evidence, hit_units, relevant_searchable
from ragbench.judge.citations import citation_scores, raw_scores
from ragbench.judge.context import context_refs, context_scores, openviking_evidence
from ragbench.judge.document import case_document_scores
from ragbench.judge.hops import HopInput, record_hops
from ragbench.judge.retrieval import doc_recall_scores, retrieval_scores
from ragbench.judge.route_scores import ROUTE, route_scores
from ragbench.judge.scorers import scorer_scores
from ragbench.llm.errors import LLMCircuitOpenError
from ragbench.protocols import ExplainingJudge, Judge, QueryExpander
from ragbench.query.routed import Decision
from ragbench.rerank.fallback import rerank_or_keep
from ragbench.retrieval.baselines import baseline_of
from ragbench.routing import Route, route_for
from ragbench.session import LEDGER
from ragbench.trace import expansion_stage, gold_path, stage
from ragbench.types import Answer, CaseResult, ChunkTree, Context, Hit, Query, Usage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobLookup:
    """What every case of a job reads: the chunk tree, each question's evidence map (by qid), the metric
    cut-offs, and the corpus vectors with each chunk's row (for rerankers that need vectors, MMR)."""

    tree: ChunkTree
    evidence: Mapping[str, EvidenceMap]
    ks: Sequence[int]
    vectors: np.ndarray | None = None
    row_of: Mapping[str, int] = field(default_factory=dict)
    coverage: Mapping[str, Coverage] = field(default_factory=dict)  # per qid (evidence.Coverage), when kept
    dataset: str = ""  # the evaluation set's name (its case records name it)


@dataclass
class Case:
    """One case between a job's waves (ragbench.pipeline): what its steps made so far, and its result once
    known (failed or skipped by a step, or complete without a generator): later steps leave it alone."""

    query: Query
    hits: list[Hit]  # retrieval's, then as reranked
    emap: EvidenceMap
    tree: ChunkTree
    gold: Mapping[str, Any]  # trace=true: the gold searchable chunks (ragbench.trace)
    latency: dict[str, float]
    scores: dict[str, float] = field(default_factory=dict)
    contexts: tuple[Context, ...] = ()
    answer: Answer | None = None
    answer_key: str = ""
    judge_notes: dict[str, Any] = field(default_factory=dict)  # per judge: rubric and reasoning per metric
    trace: dict[str, Any] = field(default_factory=dict)
    result: CaseResult | None = None
    route: Route | None = None  # the route its routing picked (None: its gold type's, ragbench.routing)
    repeat: int | None = None  # repeats=N (N > 1): which repeat this copy is (ragbench.repeats)


class CaseRunner:
    """A case's steps, one per wave: ``expand`` (rerank, expand, the retrieval and context scores),
    ``generate``, ``judge``; then ``result``. Each step isolates its case: an exception ends that case
    failed (a budget stop: skipped), recorded and scored zero, never the job. Thread-safe."""

    def __init__(self, components: Components, cache: StageCache) -> None:
        self.c = components
        self.cache = cache
        self.halted: str | None = None  # an endpoint breaker's message: later steps are not run
        # retrieval=oracle: every gold unit is a context, whatever top-k (a Protocol isinstance: once, not per case)
        self.oracle = baseline_of(components.retriever) == "oracle"
        self.own: dict[str, str | None] = {}  # generate.history=own: each turn's answer, by qid

    def expand(self, query: Query, hits: list[Hit], lookup: JobLookup, *, qvec: np.ndarray | None = None,
               search_s: float | None = None, votes: Mapping[str, int] | None = None,
               stages: Sequence[tuple[str, Sequence[Hit]]] = (), hops: Sequence[HopInput] | None = None,
               adaptive: Mapping[str, Any] | None = None, route: Decision | None = None) -> Case:
        """The expand wave's step: rerank, expand, and the retrieval and context scores; ``hops``: a
        multi-step case's hops (``ragbench.judge.hops``), ``adaptive``: its retrieve-or-not decision,
        ``route``: its routing decision (``ragbench.query.routed``; a classifier's class is recorded)."""
        emap = lookup.evidence[query.qid]
        case = Case(query=query, hits=hits, emap=emap, tree=lookup.tree,
                    latency={} if search_s is None else {"search": search_s},
                    gold=relevant_searchable(lookup.tree, emap) if (self.c.trace and emap.matched) else {},
                    route=None if route is None else route.route)
        if route is not None and route.record is not None:  # trace.route, scored from the record
            case.trace[ROUTE] = dict(route.record)
            case.scores.update(route_scores(case.trace[ROUTE]))
        if self.c.trace:  # child retrievers' and variants' rankings (ragbench.trace.branch_stages), then retrieval
            case.trace["stages"] = [*(stage(name, r, case.gold) for name, r in stages),
                                    stage("retrieval", hits, case.gold)]
        if hops is not None or adaptive is not None:
            case.scores.update(record_hops(case.trace, hops, adaptive, emap, lookup.coverage.get(query.qid)
                                           or Coverage(lookup.tree, emap), self.c.topk))
        return self._step(case, lambda: self._expand(case, lookup, qvec, votes or {}))

    def generate(self, case: Case) -> Case:
        """The generate wave's step: the answer, from the stage cache or the generator."""
        return self._step(case, lambda: self._generate(case))

    def judge(self, case: Case) -> Case:
        """The judge wave's step: every judge's verdicts."""
        return self._step(case, lambda: self._judge(case))

    def finish(self, case: Case) -> CaseResult:
        """The judge wave's step, and the case's result."""
        return self.result(self.judge(case))

    def result(self, case: Case) -> CaseResult:
        return case.result or CaseResult(
            query=case.query, hits=tuple(case.hits), contexts=case.contexts, answer=case.answer,
            scores=case.scores, latency=case.latency, judge_notes=case.judge_notes, trace=case.trace)

    def _step(self, case: Case, work: Callable[[], None]) -> Case:
        """Runs ``work`` on a case not ended yet; any exception ends it (the job goes on)."""
        if case.result is not None:
            return case
        if self.halted is not None:  # the endpoint is down or the key wrong: not run, failed, not lost
            case.result = self._ended(case, "failed", LLMCircuitOpenError.__name__, self.halted, answer=None)
            return case
        try:
            with repeats.repeat(case.repeat, self.c.repeats.seed):  # its LLM requests: the repeat's seed and key
                work()
        except BudgetExhaustedError as exc:  # no request was sent: the case is skipped, not failed
            case.result = self._ended(case, "skipped", type(exc).__name__, str(exc), answer=None)
        except CacheCorruptError:
            raise  # a corrupt entry under cache.mode=read_only stops the job: no case is scored from it
        except Exception as exc:  # noqa: BLE001 - a case failure is recorded, counted and scored zero
            if isinstance(exc, LLMCircuitOpenError):
                self.halted = str(exc)  # reported once, as the job's error (ragbench.outcome)
            else:
                log.warning("case %s failed: %s: %s", case.query.qid, type(exc).__name__, exc)
            case.result = replace(self._ended(case, "failed", type(exc).__name__, str(exc), answer=case.answer),
                                  judge_notes=case.judge_notes, trace=case.trace)
        return case

    @staticmethod
    def _ended(case: Case, status: str, error_type: str, error: str, *, answer: Answer | None) -> CaseResult:
        return CaseResult(query=case.query, hits=tuple(case.hits), contexts=case.contexts, answer=answer,
                          scores=case.scores, status=status, error_type=error_type, error=error[:500],
                          latency=case.latency)

    def _expand(self, case: Case, lookup: JobLookup, qvec: np.ndarray | None, votes: Mapping[str, int]) -> None:
        c, query, emap, scores, trace, gold = self.c, case.query, case.emap, case.scores, case.trace, case.gold
        tree, ks, vectors, row_of = lookup.tree, lookup.ks, lookup.vectors, lookup.row_of
        t = time.perf_counter()
        for reranker in c.rerankers:
            chunk_vecs = None
            if reranker.needs_vectors and vectors is not None:
                chunk_vecs = {h.chunk_id: vectors[row_of[h.chunk_id]] for h in case.hits if h.chunk_id in row_of}
            extra = {"votes": votes} if reranker.needs_votes else {}
            case.hits = rerank_or_keep(reranker, query, case.hits, trace, tree=tree, k=len(case.hits),
                                       query_vector=qvec, chunk_vectors=chunk_vecs, **extra)
            if c.trace:
                trace["stages"].append(stage(f"rerank:{type(reranker).__name__}", case.hits, gold))
        if c.rerankers:
            case.latency["rerank"] = time.perf_counter() - t
        oracle = self.oracle
        expander, topk = route_for(c.routes, query, c.expander, c.topk, case.route)  # routing, else the job's
        final = case.hits = case.hits if oracle else case.hits[: max(max(ks), topk)]
        if c.trace:
            trace["stages"].append(stage("topk", final[:topk], gold))
        ranked = final if oracle else final[: max(ks)]
        scores.update(retrieval_scores(tree, emap, ranked, ks, c.topk, lookup.coverage.get(query.qid)))
        if emap.matched and c.dataset.doc_recall:  # the adapter declares its evidence names documents
            scores.update(doc_recall_scores([tree[h.chunk_id].doc_id for h in final], query.doc_ids, ks))
        if emap.matched and c.retrieval_scorers:  # on what the case record keeps, so verify recomputes them
            cov = lookup.coverage.get(query.qid) or Coverage(tree, emap)
            scores.update(scorer_scores(c.retrieval_scorers, ranked=[h.chunk_id for h in final[: max(ks)]],
                                        covered=hit_units(tree, emap, final[: max(ks)], cov),
                                        qrels=cov.unit_qrels(), chunk_qrels=cov.chunk_qrels(), ks=ks))
        if emap.matched:  # retrieval/doc/*: datasets judged per document (ragbench.judge.document)
            scores.update(case_document_scores(c.dataset, tree, emap, query, ranked, c.topk, scope=c.scope))
        t = time.perf_counter()
        shown = final if oracle else final[:topk]
        case.contexts = tuple(expander.expand_query(query, shown, tree) if isinstance(expander, QueryExpander)
                              else expander.expand(shown, tree))
        case.latency["expand"] = time.perf_counter() - t
        if c.trace:
            trace["stages"].append(expansion_stage(tree, emap, case.contexts))
            trace.update(gold_path(trace["stages"]) if emap.matched else {})
        scores.update(context_scores([x.text for x in case.contexts], [context_refs(tree, x) for x in case.contexts],
                                     emap.texts, openviking_evidence(query), bool(emap.matched)))
        if c.generator is None:  # stages=retrieval: retrieval and context metrics only
            case.result = CaseResult(query=query, hits=tuple(final), contexts=case.contexts, answer=None,
                                     scores=scores, latency=case.latency, trace=case.trace)

    def _generate(self, case: Case) -> None:
        c, contexts = self.c, case.contexts
        query = c.history.for_generation(case.query, self.own)  # a conversation's turn: with its history
        assert c.generator is not None
        t = time.perf_counter()
        case.answer_key = keys.answer_key(c.generator.identity, query, contexts, repeat=case.repeat)
        answer = self.cache.get_record("answers", case.answer_key, parse=answer_from)
        if answer is not None:
            LEDGER.save("llm", answer.usage)  # served by the stage cache: saved, never spent
        else:
            answer = c.generator.answer(query, contexts)  # in a batched wave: waits for the wave's batch
            self.cache.put_record("answers", case.answer_key, {"generator": c.generator.identity,
                                                               "qid": query.qid}, answer_record(answer))
        hook = getattr(c.dataset, "postprocess", None)  # the adapter's answer post-processing (dataset.postprocess)
        if hook is not None:  # scored on the processed text; answer/raw_*: the same scores of the reply as given
            answer = replace(answer, text=hook.process(answer.text, case.query), raw_text=answer.text)
            case.scores.update(raw_scores(answer.text if answer.raw_text is None else answer.raw_text,
                                          case.query.answers, dataset=c.dataset.name, meta=case.query.meta))
        case.answer = answer
        if query.conversation is not None:
            self.own[query.qid] = answer.text
        case.latency["generate"] = time.perf_counter() - t
        if answer.citations and case.emap.matched:
            cited = [n for n in answer.citations if 1 <= n <= len(contexts)]
            if cited:
                case.scores["answer/citation_hit_rate"] = sum(
                    context_has_evidence(case.tree, case.emap, contexts[n - 1]) for n in cited) / len(cited)
        case.scores.update(citation_scores(answer.cited, answer.citations, [x.text for x in contexts],
                                           case.query.meta))

    def _judge(self, case: Case) -> None:
        assert case.answer is not None
        t = time.perf_counter()
        for name, judge in self.c.judges.items():
            case.scores.update(self.verdict(judge, case.query, case.contexts, case.answer, case.answer_key,
                                            notes=case.judge_notes.setdefault(name, {})))
        case.latency["judge"] = time.perf_counter() - t


    def verdict(self, judge: Judge, query: Query, contexts: Sequence[Context], answer: Answer,
                answer_key: str, notes: dict[str, Any] | None = None) -> dict[str, float]:
        """A judge's scores; model judges (``ExplainingJudge``: an ``identity`` and ``judge_notes``) are
        cached per case, with the rubric names and reasoning they explain put into ``notes``."""
        notes = {} if notes is None else notes
        if not isinstance(judge, ExplainingJudge):
            return judge.judge(query, contexts, answer)
        identity = judge.identity
        key = keys.verdict_key(identity, answer_key, answer, query)
        cached = self.cache.get_record("verdicts", key, parse=verdict_with_notes)
        if cached is not None:
            notes.update(cached[1])
            LEDGER.save("judge", Usage(prompt_tokens=int(cached[0].get("judge/prompt_tokens", 0)),
                                       completion_tokens=int(cached[0].get("judge/completion_tokens", 0)),
                                       cost_usd=float(cached[0].get("judge/cost_usd", 0.0)), cached=True))
            return cached[0]
        scores, explained = judge.judge_notes(query, contexts, answer)  # in a batched wave: waits for it
        notes.update(explained)
        if not any(k.endswith("judge_failed") and v for k, v in scores.items()):
            self.cache.put_record("verdicts", key, {"judge": identity, "qid": query.qid},
                                  {**scores, **({VERDICT_NOTES: explained} if explained else {})})
        return scores
