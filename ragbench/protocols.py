"""Stage interfaces: each component class satisfies one of these and is picked by Hydra `_target_`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from ragbench.types import Answer, ChunkTree, Context, Document, EvalSet, Hit, Query

if TYPE_CHECKING:
    from ragbench.evidence import EvidenceMap


@runtime_checkable
class DatasetAdapter(Protocol):
    """Reads a dataset in its official layout, and declares its protocol (``datasets.base.BaseAdapter``):
    ``evidence_level`` (passage | document), ``default_scope`` (document | corpus) and ``doc_recall``."""

    name: str
    evidence_level: str
    default_scope: str
    doc_recall: bool

    def load(self) -> EvalSet: ...


@runtime_checkable
class AnswerPostprocessor(Protocol):
    """A dataset's answer post-processing (``dataset.postprocess``, ``ragbench.datasets.postprocess``): the
    generated answer as scored (option letter -> option text, ``$1,234.5 million`` -> ``1234.5``). The
    pipeline calls it after generation; the unprocessed answer is kept and scored as ``answer/raw_*``."""

    name: str

    def process(self, text: str, query: Query) -> str: ...


@runtime_checkable
class Chunker(Protocol):
    """Splits documents into a tree (document > section > paragraph > sentence)."""

    def chunk(self, docs: Sequence[Document]) -> ChunkTree: ...

    def params(self) -> Mapping[str, Any]: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors. ``identity`` enters every index key."""

    @property
    def identity(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class Retriever(Protocol):
    """Indexes the searchable chunks once, then answers batches of queries.

    ``needs_vectors`` tells the pipeline to embed chunks and queries for it; the retriever itself
    never embeds, so embedding stays cacheable and shared between retrievers.
    """

    needs_vectors: bool

    def build(self, *, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray | None) -> None: ...

    def search(
        self, *, texts: Sequence[str], vectors: np.ndarray | None, k: int
    ) -> list[list[Hit]]: ...

    def params(self) -> Mapping[str, Any]: ...


@runtime_checkable
class Reranker(Protocol):
    """Reorders (and may cut) the hits of one query.

    ``needs_vectors`` asks the pipeline for the query vector and the hit chunks' vectors (MMR);
    otherwise both arrive as None. ``needs_votes`` asks for ``votes=`` (chunk id -> how many query
    variants retrieved it, ragbench.query.plan) as one more keyword argument of ``rerank``.
    """

    needs_vectors: bool
    needs_votes: bool

    def rerank(
        self,
        query: Query,
        hits: Sequence[Hit],
        *,
        tree: ChunkTree,
        k: int,
        query_vector: np.ndarray | None,
        chunk_vectors: Mapping[str, np.ndarray] | None,
    ) -> list[Hit]: ...


@runtime_checkable
class Expander(Protocol):
    """Turns hits into the contexts the generator reads (small-to-big): each hit's ancestor at
    ``parent_depth`` (routing may change it per question type), at most ``max_context_tokens`` in all."""

    parent_depth: int
    max_context_tokens: int | None

    def expand(self, hits: Sequence[Hit], tree: ChunkTree) -> list[Context]: ...


@runtime_checkable
class Generator(Protocol):
    """Answers a query from contexts. ``identity`` names the model honestly.

    ``max_concurrency`` is how many cases the pipeline may run through it at once (threads).
    """

    identity: str
    max_concurrency: int

    def answer(self, query: Query, contexts: Sequence[Context]) -> Answer: ...


@runtime_checkable
class Judge(Protocol):
    """Scores one answer; returns metric name -> value (names namespaced like ``answer/f1``).

    A judge that cannot judge a case raises (the case is then recorded as failed) or, for a
    garbled reply it could not parse, returns ``<ns>/judge_failed = 1.0`` and no score.
    ``score_keys`` are the answer-quality keys it produces: logged as 0 when every case failed, not logged
    when cases ran and none produced them (ragbench.judge.aggregate.summarize).
    """

    score_keys: tuple[str, ...]

    def judge(self, query: Query, contexts: Sequence[Context], answer: Answer) -> dict[str, float]: ...


@runtime_checkable
class QueryTransform(Protocol):
    """Maps a question to the texts searched for it (``query=none|rules|multi_query|hyde``,
    ragbench.query.transforms)."""

    name: str
    lexical_ok: bool  # False: its variants are not questions (hyde), refused with a lexical retriever
    max_concurrency: int  # questions transformed at once (threads)
    failures: int  # questions whose transform failed and searched the question alone (query/transform_failures)

    def variants(self, query: Query) -> tuple[str, ...]: ...

    def params(self) -> Mapping[str, Any]: ...


# Optional capabilities: a component has one of these on top of its stage protocol; the pipeline and the
# planner narrow with ``isinstance`` instead of probing attributes.


@runtime_checkable
class LoadableEmbedder(Protocol):
    """An embedder whose model loads on demand; the pipeline times the load apart from encoding."""

    loaded: bool

    def load(self) -> None: ...


@runtime_checkable
class BaselineRetriever(Protocol):
    """A baseline that retrieves nothing itself: ``closed_book`` (no context) or ``oracle`` (the gold units)."""

    baseline: str

    def hits_for(self, emap: EvidenceMap) -> list[Hit]: ...


@runtime_checkable
class PromptedGenerator(Protocol):
    """A generator that sends chat prompts to ``model``; ``prompts`` lists the messages of one case."""

    identity: str
    model: str

    def prompts(self, query: Query, contexts: Sequence[Context]) -> list[list[dict[str, str]]]: ...


@runtime_checkable
class PromptedJudge(Protocol):
    """A model judge: ``identity`` enters its verdict cache key; ``prompts`` lists one case's requests to
    ``model``."""

    identity: str
    model: str

    def prompts(self, query: Query, contexts: Sequence[Context], answer: Answer) -> list[list[dict[str, str]]]: ...


@runtime_checkable
class ExplainingJudge(Protocol):
    """A model judge: its verdicts are cached per case under ``identity``, with the rubric names and
    reasoning ``judge_notes`` returns beside the scores (written into the case record)."""

    identity: str

    def judge_notes(self, query: Query, contexts: Sequence[Context],
                    answer: Answer) -> tuple[dict[str, float], dict[str, Any]]: ...


@runtime_checkable
class OutsideRetriever(Protocol):
    """A retriever that reads another system's contexts per question (``ragbench.systems``): told the questions
    and the chunk tree first; its hits are not kept in the retrieval cache (the system's replies are cached
    per call, so a failed call is asked again on a rerun)."""

    def attach(self, queries: Sequence[Query], tree: ChunkTree) -> None: ...


@runtime_checkable
class QueryBound(Protocol):
    """A retriever told the job's questions and chunk tree before the search wave: a run file's rankings are
    keyed by question id (``retrieval=run_file``), an outside system asks each question (``system=...``)."""

    def prepare(self, queries: Sequence[Query], tree: ChunkTree) -> None: ...


@runtime_checkable
class TrajectoryRetriever(Protocol):
    """An outside system's retriever whose replies may carry a trajectory (docs/multi-step.md): per question,
    each retrieval step's query and its hits, scored as hops; None for a question without one."""

    def trajectory(self, qid: str) -> Sequence[tuple[str, Sequence[Hit]]] | None: ...


@runtime_checkable
class ApproximateRetriever(Protocol):
    """A retriever whose index may approximate an exact search (FAISS IVF/HNSW): ``ann_recall`` measures how
    much of an exact search's top k its hits hold, on the job's query vectors (``retrieval/ann_recall_at_<k>``;
    empty for an exact index)."""

    def ann_recall(self, *, vectors: np.ndarray, hits: Sequence[Sequence[Hit]],
                   ks: Sequence[int]) -> dict[str, float]: ...


@runtime_checkable
class WaveAnswerer(Protocol):
    """Answers one wave's requests of one model (``ragbench.llm.wave``): a provider batch
    (``ragbench.llm.batch.BatchRunner``) or the local model (``ragbench.llm.local.runner.LocalRunner``).
    ``run`` takes {custom id: chat request body} and returns {custom id: ``BatchReply``};
    ``batch_id``: the provider batch that answered them (None: none)."""

    batch_id: str | None

    def run(self, bodies: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]: ...


@runtime_checkable
class QueryExpander(Protocol):
    """An expander whose contexts depend on the question (``expander=system``: the system's own passages)."""

    def expand_query(self, query: Query, hits: Sequence[Hit], tree: ChunkTree) -> list[Context]: ...


@runtime_checkable
class FusedRetriever(Protocol):
    """A retriever that fuses the rankings of ``children``, each searched ``candidates`` deep (RRF)."""

    children: Sequence[Retriever]
    candidates: int


@runtime_checkable
class DepthLimited(Protocol):
    """A retriever that names the deepest search whose top ``k`` equals a search at depth ``k`` (None:
    any depth), so the jobs of a top-k sweep share one search (ragbench.retrieval.batch)."""

    def depth_limit(self, k: int) -> int | None: ...


@runtime_checkable
class RetrievalScorer(Protocol):
    """A per-query retrieval metric added from outside the package (``metrics.retrieval: [{_target_: ...}]``),
    scored on the ranking the case record keeps, so ``ragbench.verify`` recomputes it. ``metrics`` declares
    every key ``score`` returns (``retrieval/<name>``, a ``judge.metric_info.MetricInfo`` each, ``kind``
    ``diagnostic``: like every retrieval figure, the mean over the queries with matched evidence).
    ``ranked``: chunk ids best first (the first max(ks) hits); ``covered``: the evidence units each hit
    covers; ``qrels``: unit -> grade at the dataset's evidence unit; ``chunk_qrels``: chunk -> grade."""

    @property
    def metrics(self) -> Mapping[str, Any]: ...

    def score(self, *, ranked: Sequence[str], covered: Sequence[Sequence[str]], qrels: Mapping[str, int],
              chunk_qrels: Mapping[str, int], ks: Sequence[int]) -> dict[str, float]: ...


@runtime_checkable
class Preflight(Protocol):
    """A component that loads or contacts its model once, before the first case (ragbench.outcome)."""

    def preflight(self) -> None: ...


@runtime_checkable
class RemoteEmbedder(Protocol):
    """An embedder that sends ``batch_size`` texts per request to an embedding API ``model`` (billed, and
    contacted once before the first case)."""

    model: str
    batch_size: int

    def preflight(self) -> None: ...


# What MLflow logs, apart from the cache: ``identity`` (and a chunker's or retriever's ``params()``) is what
# enters cache keys; these say what a run shows. Methods, not properties: on Python 3.11 ``isinstance``
# against a runtime-checkable Protocol evaluates properties.


@runtime_checkable
class LoggedParams(Protocol):
    """A component with run params the config does not show (a prompt or rubric file and its content hash).

    ``log_params()`` is for MLflow only: it enters no cache key (``identity`` does that)."""

    def log_params(self) -> Mapping[str, Any]: ...


@runtime_checkable
class LoggedTags(Protocol):
    """A component with run tags of its own (a judge: its model, and whether it is also the generator).

    ``log_tags()`` is for MLflow only: it enters no cache key (``identity`` does that)."""

    def log_tags(self) -> Mapping[str, str]: ...
