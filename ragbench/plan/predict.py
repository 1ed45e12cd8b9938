"""One job's predicted bill, from its composed config, without running a model or writing anything.

Loads and chunks the dataset (no model), computes the stage cache's keys (``ragbench.cache.keys``) to
see what is cached, and renders the real prompt templates: with the job's retrieval results cached (and
no reranker) the contexts are the real ones, so prompts are exact and each answer and verdict is looked
up in the cache; otherwise each question's contexts are estimated as top-k expanded units of the mean
size of the expander's target level (``expander.max_context_tokens`` caps them). Completion tokens come
from previous runs (``rates.json``), else the mean gold answer length (+2 for a citation) for answers and
``JUDGE_REPLY_TOKENS`` for verdicts. Query rewriting (``query=multi_query|hyde``) is one request per question
whose reply is not cached (role ``query``). Tokens are whitespace words, the unit of ``context/tokens``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragbench.cache import keys
from ragbench.cache.entries import (
    answer_from,
    index_fingerprint,
    load_hits,
    vectors_identity,
    verdict_with_notes,
)
from ragbench.cache.store import StageCache
from ragbench.components import Components
from ragbench.evidence import EvidenceMatcher
from ragbench.expand import count_tokens
from ragbench.pipeline import needed_depth, search_depth, searched_tree
from ragbench.plan.rates import words
from ragbench.protocols import BaselineRetriever, PromptedGenerator, PromptedJudge, RemoteEmbedder
from ragbench.query.plan import QueryPlan, plan_queries
from ragbench.query.transforms import HyDE, LLMTransform, MultiQuery
from ragbench.retrieval.baselines import baseline_of
from ragbench.types import Answer, ChunkTree, Context, Level, Query

JUDGE_REPLY_TOKENS = 30  # a JSON verdict with a sentence of reasoning
HYDE_REPLY_TOKENS = 50  # the 2-3 sentence passage HYDE_PROMPT asks for


@dataclass
class RoleBill:
    """Predicted requests of one role (generation, judge, embedding) still to send."""

    model: str = ""
    calls: int = 0
    cached: int = 0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0

    @property
    def tokens(self) -> float:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class JobPlan:
    job: str
    dataset: str
    questions: int
    ingest: str  # the index fingerprint: jobs sharing it share one ingest
    ingest_cached: bool
    texts_to_embed: int
    embedder: str
    baseline: str | None
    exact_contexts: bool  # True when the contexts came from cached retrieval results
    roles: dict[str, RoleBill] = field(default_factory=dict)


def _words(messages: Sequence[Mapping[str, str]]) -> int:
    return words(messages)  # the unit a recorded rate's prompt size is keyed by (ragbench.plan.rates)


def _estimated_contexts(c: Components, tree: ChunkTree) -> tuple[Context, ...]:
    """top-k contexts of the mean size of the expander's target level (capped by its token budget)."""
    level = Level(min(c.expander.parent_depth, max(ch.level for ch in tree.chunks.values())))
    sizes = [count_tokens(ch.text) for ch in tree.chunks.values() if ch.level == level] or [0]
    size = sum(sizes) / len(sizes)
    n = c.topk
    cap = c.expander.max_context_tokens
    words = [int(size)] * n
    if cap is not None:
        words = [max(0, min(w, cap - sum(words[:i]))) for i, w in enumerate(words)]
    return tuple(Context(chunk_id=f"plan{i}", text=" ".join(["w"] * w), title="", level=level, hit_ids=())
                 for i, w in enumerate(words) if w)


def _cached_contexts(c: Components, cache: StageCache, tree: ChunkTree, queries: Sequence[Query],
                     index_fp: str) -> list[tuple[Context, ...]] | None:
    """Each question's real contexts when its retrieval results are cached and no reranker runs."""
    base = baseline_of(c.retriever)
    if base == "closed_book":
        return [() for _ in queries]
    if base == "oracle":
        assert isinstance(c.retriever, BaselineRetriever)
        matcher = EvidenceMatcher(tree)
        return [tuple(c.expander.expand(c.retriever.hits_for(matcher.match(q)), tree)) for q in queries]
    if c.rerankers or not cache.reads:
        return None
    variants = _searched(c, queries)
    if variants is None:
        return None
    folder = cache.dir / "retrieval" / keys.retrieval_key(index_fp, variants.texts, search_depth(c))
    if not folder.is_dir():
        return None
    try:
        hits = load_hits(folder)
    except Exception:  # noqa: BLE001 - an unreadable entry: estimate instead
        return None
    needed = needed_depth(c)
    fused, _ = variants.fuse([h[:needed] for h in hits], needed)  # as the pipeline fuses a question's variants
    return [tuple(c.expander.expand(h[: c.topk], tree)) for h in fused]


def _searched(c: Components, queries: Sequence[Query]) -> QueryPlan | None:
    """The texts the pipeline searches for the questions (``query=...``), when no request is needed for
    them: an LLM transform's only when the reply cache holds every one of its replies."""
    if isinstance(c.query, LLMTransform) and not all(c.query.client.cached(c.query.messages(q.text)) for q in queries):
        return None
    return plan_queries(c.query, queries, k_rrf=c.query_k_rrf)


def _query_bill(transform: LLMTransform, queries: Sequence[Query]) -> RoleBill:
    """One query-rewriting request per question whose reply the cache does not hold: its prompt's words,
    and a reply of ``n`` phrasings of the question's length (multi_query) or a short passage (hyde)."""
    bill = RoleBill(model=transform.client.model)
    for q in queries:
        messages = transform.messages(q.text)
        if transform.client.cached(messages):
            bill.cached += 1
            continue
        bill.calls += 1
        bill.prompt_tokens += _words(messages)
        if isinstance(transform, MultiQuery):
            bill.completion_tokens += transform.n * count_tokens(q.text)
        elif isinstance(transform, HyDE):
            bill.completion_tokens += HYDE_REPLY_TOKENS
    return bill


def predict(job: str, c: Components, cache: StageCache, rates: Mapping[str, Mapping[str, float]],
            loaded: dict[str, Any]) -> JobPlan:
    """The job's plan. ``loaded`` memoises datasets and chunk trees between jobs of one plan."""
    ds_key = repr(vars(c.dataset))
    evalset = loaded.get(ds_key) or loaded.setdefault(ds_key, c.dataset.load())
    ck = keys.chunks_key(evalset.documents, c.chunker)
    tree = loaded.get(ck) or loaded.setdefault(ck, c.chunker.chunk(evalset.documents))
    tree = searched_tree(tree, c.parent_vectors)
    queries = list(evalset.queries)
    index_fp = index_fingerprint(tree, c.embedder, c.retriever, scope=c.scope, parent_vectors=c.parent_vectors)
    searchable = tree.searchable()
    vectors = c.retriever.needs_vectors or any(r.needs_vectors for r in c.rerankers)
    base = baseline_of(c.retriever)
    if base:
        cached_ingest, to_embed = True, 0
    elif vectors and c.embedder is not None:
        folder = cache.dir / "index" / keys.index_key(ck, vectors_identity(c.embedder, c.parent_vectors))
        cached_ingest = cache.reads and folder.is_dir()
        to_embed = 0 if cached_ingest else len({ch.text for ch in searchable})
    else:
        cached_ingest, to_embed = True, 0  # a lexical index is built in memory, nothing to embed
    plan = JobPlan(job=job, dataset=evalset.name, questions=len(queries), ingest=index_fp,
                   ingest_cached=cached_ingest, texts_to_embed=to_embed,
                   embedder=c.embedder.identity if (vectors and c.embedder) else "none",
                   baseline=base, exact_contexts=False)
    if vectors and isinstance(c.embedder, RemoteEmbedder) and c.embedder.model and to_embed:
        plan.roles["embedding"] = RoleBill(model=c.embedder.model, calls=-(-to_embed // c.embedder.batch_size),
                                           prompt_tokens=float(sum(count_tokens(ch.text) for ch in searchable)))
    if isinstance(c.query, LLMTransform):
        plan.roles["query"] = _query_bill(c.query, queries)
    gen = c.generator
    if gen is None:
        return plan
    real = _cached_contexts(c, cache, tree, queries, index_fp)
    plan.exact_contexts = real is not None
    estimate = () if real is not None else _estimated_contexts(c, tree)
    gold = [count_tokens(a) for q in queries for a in q.answers[:1]]
    reply = float(rates.get(gen.identity, {}).get("completion_tokens") or (sum(gold) / max(len(gold), 1) + 2))
    gbill = plan.roles.setdefault("generation", RoleBill(model=gen.model)) if isinstance(gen, PromptedGenerator) else None
    judges = {n: j for n, j in c.judges.items() if isinstance(j, PromptedJudge)}
    jbill = RoleBill(model=",".join(sorted({j.model for j in judges.values()})))
    runs = range(c.repeats.n) if c.repeats.on else (None,)  # repeats=N: each question answered and judged N times
    for r, (i, q) in ((r, iq) for r in runs for iq in enumerate(queries)):
        contexts = real[i] if real is not None else estimate
        answer: Answer | None = None
        akey = keys.answer_key(gen.identity, q, contexts, repeat=r) if real is not None else ""
        if akey and cache.reads:
            answer = cache.get_record("answers", akey, parse=answer_from)
        if gbill is not None:
            if answer is not None:
                gbill.cached += 1
            else:
                gbill.calls += 1
                assert isinstance(gen, PromptedGenerator)
                gbill.prompt_tokens += sum(_words(m) for m in gen.prompts(q, contexts))
                gbill.completion_tokens += reply
        guess = answer or Answer(text=" ".join(["w"] * int(round(reply))), model="")
        for judge in judges.values():
            prompts = judge.prompts(q, contexts, guess)
            verdict = None
            if answer is not None and cache.reads:
                verdict = cache.get_record("verdicts", keys.verdict_key(judge.identity, akey, answer, q),
                                           parse=verdict_with_notes)
            if verdict is not None:
                jbill.cached += len(prompts)
                continue
            jbill.calls += len(prompts)
            jbill.prompt_tokens += sum(_words(m) for m in prompts)
            jbill.completion_tokens += JUDGE_REPLY_TOKENS * len(prompts)
    if judges:
        plan.roles["judge"] = jbill
    return plan
