"""What one job runs (``Components``) and what it produced (``JobResult``): the records passed between
the app, the pipeline, the case runner and the tracker. A leaf module: it imports no stage logic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ragbench.errors import ConfigError
from ragbench.evidence import Coverage, EvidenceMap
from ragbench.generate.history import HistoryPolicy
from ragbench.protocols import (
    Chunker,
    DatasetAdapter,
    Embedder,
    Expander,
    Generator,
    Judge,
    QueryTransform,
    Reranker,
    RetrievalScorer,
    Retriever,
)
from ragbench.query.multistep import MultiStep
from ragbench.query.routed import Router
from ragbench.query.transforms import NoQueryTransform, check_transform
from ragbench.repeats import RepeatPolicy
from ragbench.retrieval.batch import DEFAULT_SEARCH_DEPTH
from ragbench.routing import Route
from ragbench.types import CaseResult, ChunkTree, EvalSet

PARENT_VECTORS = ("none", "mean", "direct")  # retrieval.parent_vectors


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
    generator: Generator | None  # None under stages=retrieval (ragbench.stages)
    judges: Mapping[str, Judge]
    scope: str = "corpus"  # retrieval.scope: corpus | document (ragbench.retrieval.scope)
    search_depth: int = DEFAULT_SEARCH_DEPTH  # retrieval.search_depth (ragbench.retrieval.batch)
    query: QueryTransform = field(default_factory=NoQueryTransform)  # query=none|rules|multi_query|hyde
    query_k_rrf: float = 60.0  # query.k_rrf: fuses a question's variant rankings
    trace: bool = False  # trace=true: per-stage candidates in each case record (ragbench.trace)
    routes: Mapping[str, Route] = field(default_factory=dict)  # routing.by_type (ragbench.routing)
    # routing.by=rules|llm, or a gold-type route to decompose/iterative: per question a route (ragbench.query.routed)
    router: Router | None = None
    # retrieval.parent_vectors: also search the parents of the searched chunks, their vectors the mean of
    # their children's (EasyRAG's propagation) or embedded directly
    parent_vectors: str = "none"
    # metrics.retrieval: per-query retrieval metrics from outside the package (ragbench.judge.scorers)
    retrieval_scorers: Sequence[RetrievalScorer] = ()
    # retrieval.mode=single|iterative|adaptive, max_hops, adaptive_threshold (ragbench.query.multistep)
    multistep: MultiStep = field(default_factory=MultiStep)
    # generate.history*: the earlier turns a conversation's turn is answered with (ragbench.generate.history)
    history: HistoryPolicy = field(default_factory=HistoryPolicy)
    # repeats: each case generated and judged n times, its answer scores reduced (ragbench.repeats)
    repeats: RepeatPolicy = field(default_factory=RepeatPolicy)

    def __post_init__(self) -> None:
        if self.parent_vectors not in PARENT_VECTORS:
            raise ConfigError(f"retrieval.parent_vectors={self.parent_vectors!r} is not valid; choose one of "
                              f"{list(PARENT_VECTORS)}")
        for kind, part, proto in (*(("reranker", r, Reranker) for r in self.rerankers), ("expander", self.expander,
                                  Expander), *(("judge", j, Judge) for j in self.judges.values()),
                                  ("query transform", self.query, QueryTransform)):
            check_stage(kind, part, proto)
        check_transform(self.query, self.retriever)  # hyde with BM25: one line, before anything runs


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
    cache_keys: Mapping[str, str] = field(default_factory=dict)
    coverage: Mapping[str, Coverage] = field(default_factory=dict)  # per qid, shared with the case stages


def check_stage(kind: str, part: object, proto: type) -> None:
    """A one-line ConfigError, before anything runs, when a component lacks a member of its stage
    Protocol (a custom reranker without ``needs_votes``). Not for embedders: their ``dim`` may call an API."""
    if isinstance(part, proto):
        return
    members = sorted({*proto.__annotations__, *(n for n, v in vars(proto).items() if callable(v) and n[0] != "_")})
    missing = [m for m in members if not hasattr(part, m)]
    raise ConfigError(f"{kind} {type(part).__module__}.{type(part).__qualname__} lacks {missing} of "
                      f"ragbench.protocols.{proto.__name__}; declare them (see that Protocol's docstring)")
