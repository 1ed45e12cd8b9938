"""One case's stages after retrieval: rerank, expand, generate, judge; answers and verdicts cached."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragbench.budget import LEDGER
from ragbench.cache import keys
from ragbench.cache.entries import VERDICT_NOTES, answer_from, answer_record, verdict_with_notes
from ragbench.cache.store import StageCache
from ragbench.components import Components
from ragbench.errors import BudgetExhaustedError, CacheCorruptError
from ragbench.evidence import Coverage, EvidenceMap, context_has_evidence, hit_units, relevant_searchable
from ragbench.judge.context import context_refs, context_scores, openviking_evidence
from ragbench.judge.document import case_document_scores
from ragbench.judge.retrieval import doc_recall_scores, retrieval_scores
from ragbench.judge.scorers import scorer_scores
from ragbench.llm.batch import Deferred
from ragbench.llm.errors import LLMCircuitOpenError
from ragbench.protocols import ExplainingJudge, Judge, QueryExpander
from ragbench.rerank.fallback import rerank_or_keep
from ragbench.retrieval.baselines import baseline_of
from ragbench.routing import route_for
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


class CaseRunner:
    """Runs the per-query stages; thread-safe (the pipeline calls it from a pool)."""

    def __init__(self, components: Components, cache: StageCache) -> None:
        self.c = components
        self.cache = cache
        self.halted: str | None = None  # an endpoint breaker's message: later cases are not run
        # llm.batch: per qid, the answer and verdicts a case made before it was deferred to a later batch
        # round (ragbench.llm.batch): the next round takes them as made, not as cache hits
        self.carried: dict[str, dict[str, Any]] = {}
        # retrieval=oracle: every gold unit is a context, whatever top-k (a Protocol isinstance: once, not per case)
        self.oracle = baseline_of(components.retriever) == "oracle"

    def run(
        self,
        query: Query,
        hits: list[Hit],
        lookup: JobLookup,
        *,
        qvec: np.ndarray | None = None,
        search_s: float | None = None,
        votes: Mapping[str, int] | None = None,
        stages: Sequence[tuple[str, Sequence[Hit]]] = (),
    ) -> CaseResult:
        """One query: rerank, expand, generate, judge. Any exception marks the case failed, never lost."""
        c = self.c
        tree, emap, ks, vectors, row_of = (lookup.tree, lookup.evidence[query.qid], lookup.ks, lookup.vectors,
                                           lookup.row_of)
        latency: dict[str, float] = {} if search_s is None else {"search": search_s}
        if self.halted is not None:  # the endpoint is down or the key wrong: not run, failed, not lost
            return CaseResult(query=query, hits=tuple(hits[: max(ks)]), contexts=(), answer=None, scores={},
                              status="failed", error_type=LLMCircuitOpenError.__name__, error=self.halted[:500],
                              latency=latency)
        scores: dict[str, float] = {}
        contexts: tuple = ()
        answer: Answer | None = None
        judge_notes: dict[str, Any] = {}  # per judge: rubric and reasoning per metric, for the case record
        final = hits
        carry = self.carried.pop(query.qid, {}) if self.carried else {}
        gold = relevant_searchable(tree, emap) if (c.trace and emap.matched) else {}
        trace: dict[str, Any] = {}
        if c.trace:  # child retrievers' and variants' rankings (ragbench.trace.branch_stages), then retrieval
            trace["stages"] = [*(stage(name, r, gold) for name, r in stages), stage("retrieval", hits, gold)]
        try:
            t = time.perf_counter()
            for reranker in c.rerankers:
                chunk_vecs = None
                if reranker.needs_vectors and vectors is not None:
                    chunk_vecs = {h.chunk_id: vectors[row_of[h.chunk_id]] for h in final if h.chunk_id in row_of}
                extra = {"votes": votes or {}} if reranker.needs_votes else {}
                final = rerank_or_keep(reranker, query, final, trace, tree=tree, k=len(final),
                                       query_vector=qvec, chunk_vectors=chunk_vecs, **extra)
                if c.trace:
                    trace["stages"].append(stage(f"rerank:{type(reranker).__name__}", final, gold))
            if c.rerankers:
                latency["rerank"] = time.perf_counter() - t
            oracle = self.oracle
            expander, topk = route_for(c.routes, query, c.expander, c.topk)  # routing.by_type, else the job's
            final = final if oracle else final[: max(max(ks), topk)]
            if c.trace:
                trace["stages"].append(stage("topk", final[:topk], gold))
            scores.update(retrieval_scores(tree, emap, final if oracle else final[: max(ks)], ks, c.topk,
                                           lookup.coverage.get(query.qid)))
            if emap.matched and c.dataset.doc_recall:  # the adapter declares its evidence names documents
                scores.update(doc_recall_scores([tree[h.chunk_id].doc_id for h in final], query.doc_ids, ks))
            if emap.matched and c.retrieval_scorers:  # on what the case record keeps, so verify recomputes them
                ranked = final[: max(ks)]
                cov = lookup.coverage.get(query.qid) or Coverage(tree, emap)
                scores.update(scorer_scores(c.retrieval_scorers, ranked=[h.chunk_id for h in ranked],
                                            covered=hit_units(tree, emap, ranked, cov), qrels=cov.unit_qrels(),
                                            chunk_qrels=cov.chunk_qrels(), ks=ks))
            if emap.matched:  # retrieval/doc/*: datasets judged per document (ragbench.judge.document)
                scores.update(case_document_scores(c.dataset, tree, emap, query, final if oracle else final[: max(ks)],
                                                   c.topk, scope=c.scope))
            t = time.perf_counter()
            shown = final if oracle else final[:topk]
            contexts = tuple(expander.expand_query(query, shown, tree) if isinstance(expander, QueryExpander)
                             else expander.expand(shown, tree))
            latency["expand"] = time.perf_counter() - t
            if c.trace:
                trace["stages"].append(expansion_stage(tree, emap, contexts))
                trace.update(gold_path(trace["stages"]) if emap.matched else {})
            scores.update(context_scores([x.text for x in contexts], [context_refs(tree, x) for x in contexts],
                                         emap.texts, openviking_evidence(query), bool(emap.matched)))
            if c.generator is None:  # stages=retrieval: retrieval and context metrics only
                return CaseResult(query=query, hits=tuple(final), contexts=contexts, answer=None, scores=scores,
                                  latency=latency)
            t = time.perf_counter()
            answer_key = keys.answer_key(c.generator.identity, query, contexts)
            answer = carry.get(f"answer:{answer_key}")  # made in an earlier batch round of this case
            if answer is None:
                answer = self.cache.get_record("answers", answer_key, parse=answer_from)
                if answer is not None:
                    LEDGER.save("llm", answer.usage)  # served by the stage cache: saved, never spent
                else:
                    answer = c.generator.answer(query, contexts)
                    self.cache.put_record("answers", answer_key, {"generator": c.generator.identity,
                                                                  "qid": query.qid}, answer_record(answer))
                    carry[f"answer:{answer_key}"] = answer
            latency["generate"] = time.perf_counter() - t
            if answer.citations and emap.matched:
                cited = [n for n in answer.citations if 1 <= n <= len(contexts)]
                if cited:
                    scores["answer/citation_hit_rate"] = sum(
                        context_has_evidence(tree, emap, contexts[n - 1]) for n in cited
                    ) / len(cited)
            t = time.perf_counter()
            deferred: Deferred | None = None
            for name, judge in c.judges.items():
                try:
                    scores.update(self.verdict(judge, query, contexts, answer, answer_key,
                                               notes=judge_notes.setdefault(name, {}), carry=carry))
                except Deferred as exc:  # batch rounds: the other judges' requests join the same batch
                    deferred = exc
            if deferred is not None:
                raise deferred
            latency["judge"] = time.perf_counter() - t
        except Deferred:  # batch rounds: run again once the batch is in, with what it made so far
            self.carried[query.qid] = carry
            raise
        except BudgetExhaustedError as exc:  # no request was sent: the case is skipped, not failed
            return CaseResult(query=query, hits=tuple(final), contexts=contexts, answer=None, scores=scores,
                              status="skipped", error_type=type(exc).__name__, error=str(exc)[:500], latency=latency)
        except CacheCorruptError:
            raise  # a corrupt entry under cache.mode=read_only stops the job: no case is scored from it
        except Exception as exc:  # noqa: BLE001 - a case failure is recorded, counted and scored zero
            if isinstance(exc, LLMCircuitOpenError):
                self.halted = str(exc)  # reported once, as the job's error (ragbench.outcome)
            else:
                log.warning("case %s failed: %s: %s", query.qid, type(exc).__name__, exc)
            return CaseResult(
                query=query, hits=tuple(final), contexts=contexts, answer=answer, scores=scores,
                status="failed", error_type=type(exc).__name__, error=str(exc)[:500], latency=latency,
                judge_notes=judge_notes, trace=trace,
            )
        return CaseResult(query=query, hits=tuple(final), contexts=contexts, answer=answer, scores=scores,
                          latency=latency, judge_notes=judge_notes, trace=trace)

    def verdict(self, judge: Judge, query: Query, contexts: Sequence[Context], answer: Answer,
                answer_key: str, notes: dict[str, Any] | None = None,
                carry: dict[str, Any] | None = None) -> dict[str, float]:
        """A judge's scores; model judges (``ExplainingJudge``: an ``identity`` and ``judge_notes``) are
        cached per case, with the rubric names and reasoning they explain put into ``notes``. ``carry``:
        verdicts made in an earlier batch round of this case (taken as made), and where this one goes."""
        notes = {} if notes is None else notes
        if not isinstance(judge, ExplainingJudge):
            return judge.judge(query, contexts, answer)
        identity = judge.identity
        key = keys.verdict_key(identity, answer_key, answer, query)
        made = (carry or {}).get(f"verdict:{key}")
        if made is not None:
            notes.update(made[1])
            return dict(made[0])
        cached = self.cache.get_record("verdicts", key, parse=verdict_with_notes)
        if cached is not None:
            notes.update(cached[1])
            LEDGER.save("judge", Usage(prompt_tokens=int(cached[0].get("judge/prompt_tokens", 0)),
                                       completion_tokens=int(cached[0].get("judge/completion_tokens", 0)),
                                       cost_usd=float(cached[0].get("judge/cost_usd", 0.0)), cached=True))
            return cached[0]
        scores, explained = judge.judge_notes(query, contexts, answer)
        if carry is not None:
            carry[f"verdict:{key}"] = (scores, explained)
        notes.update(explained)
        if not any(k.endswith("judge_failed") and v for k, v in scores.items()):
            self.cache.put_record("verdicts", key, {"judge": identity, "qid": query.qid},
                                  {**scores, **({VERDICT_NOTES: explained} if explained else {})})
        return scores
