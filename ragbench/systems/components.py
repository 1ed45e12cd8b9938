"""A system as ragbench components: ``SystemRetriever`` (the system's ranked contexts, matched to the
dataset's chunks, are the hits), ``SystemExpander`` (the contexts the generator and the judges read are the
system's own texts) and ``SystemGenerator`` (the system's answer; or, when ragbench retrieved, the system
asked with ragbench's contexts). Any of them can be swapped for ragbench's own, one half at a time:
``system=python llm=openai`` scores the system's retrieval with ragbench's generation,
``system=python retrieval=bm25 expander=parent`` ragbench's retrieval with the system's answers."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np

from ragbench import repeats
from ragbench.errors import ConfigError
from ragbench.metric_info import MetricInfo
from ragbench.systems.matching import ContextMatcher, ranked_hits, total_counts
from ragbench.systems.records import SystemRecord
from ragbench.systems.responses import DuplicateResponseError, MissingResponseError
from ragbench.systems.session import Outcome, Session, session
from ragbench.types import Answer, ChunkTree, Context, Hit, Level, Query

log = logging.getLogger(__name__)
RETRIEVER = "ragbench.systems.components.SystemRetriever"


class Source(Protocol):
    """Where a system's records come from: a responses file, a Python callable or an HTTP service."""

    kind: str

    @property
    def identity(self) -> str: ...

    def record(self, query: Query) -> SystemRecord: ...


def _workers(source: Any) -> int:
    client = getattr(source, "client", None)
    return max(1, int(getattr(client, "max_concurrency", 1)))


class SystemRetriever:
    """The system's ranked contexts as hits: each question is asked once (concurrently, within the system's
    ``max_concurrency``) when the pipeline searches; a failed question has no hits and fails its case."""

    needs_vectors = False

    def __init__(self, *, source: Source) -> None:
        self.source = source
        self._queries: list[Query] = []
        self._matcher: ContextMatcher | None = None
        self._session: Session | None = None

    def params(self) -> Mapping[str, Any]:
        return {"system": self.source.identity}

    def prepare(self, queries: Sequence[Query], tree: ChunkTree) -> None:
        """``ragbench.protocols.QueryBound``: the system is asked each question (``attach``)."""
        self.attach(queries, tree)

    def attach(self, queries: Sequence[Query], tree: ChunkTree) -> None:
        """The job's questions and chunk tree; starts the job's session afresh."""
        self._queries = list(queries)
        self._matcher = ContextMatcher(tree)
        self._session = session(self.source.identity)
        self._session.begin()
        unknown = getattr(self.source, "unknown", None)
        if unknown is not None:
            self._session.counters["unknown_qids"] = len(unknown(queries))

    def build(self, *, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray | None = None) -> None:
        """Nothing to index: the system retrieves."""

    def _ask(self, query: Query) -> Outcome:
        assert self._matcher is not None
        try:
            return Outcome(matched=self._matcher.match(self.source.record(query)))
        except Exception as exc:  # noqa: BLE001 - the case fails with it (SystemExpander re-raises it)
            return Outcome(error=exc)

    def trajectory(self, qid: str) -> list[tuple[str, list[Hit]]] | None:
        """``ragbench.protocols.TrajectoryRetriever``: each step of the question's trajectory, its query and
        its matched contexts as hits (a context matching no chunk ranks nothing: counted, as the answer's)."""
        found = self._session.outcomes.get(qid) if self._session is not None else None
        if found is None or found.matched is None or not found.matched.record.trajectory:
            return None
        return [(step.query, ranked_hits(matched))
                for step, matched in zip(found.matched.record.trajectory, found.matched.steps, strict=True)]

    def search(self, *, texts: Sequence[str], vectors: np.ndarray | None = None, k: int) -> list[list[Hit]]:
        sess = self._session
        if sess is None:
            raise ConfigError("retrieval=system is set by system=responses|python|http; fix: choose a system")
        if [q.text for q in self._queries] == list(texts):
            asked = self._queries
        else:  # one question searched alone (latency sample); else a transform's variants: refused
            by_text = {q.text: q for q in reversed(self._queries)}
            if any(t not in by_text for t in texts):
                raise ConfigError("retrieval=system searches the dataset's questions themselves; fix: query=none")
            asked = [by_text[t] for t in texts]
        todo = [q for q in dict.fromkeys(q.qid for q in asked) if q not in sess.outcomes]
        by_qid = {q.qid: q for q in asked}
        if todo:
            with ThreadPoolExecutor(max_workers=min(_workers(self.source), len(todo))) as pool:
                for qid, outcome in zip(todo, pool.map(lambda qid: self._ask(by_qid[qid]), todo), strict=True):
                    sess.outcomes[qid] = outcome
            _count(sess)
            check_matched(sess, self.source.kind)
        out: list[list[Hit]] = []
        for q in asked:
            matched = sess.outcomes[q.qid].matched
            out.append(matched.hits[:k] if matched is not None else [])
        return out


def _count(sess: Session) -> None:
    """The session's counters, from every outcome so far."""
    errors = [o.error for o in sess.outcomes.values() if o.error is not None]
    records = [o.matched for o in sess.outcomes.values() if o.matched is not None]
    sess.counters = Counter({k: sess.counters.get(k, 0) for k in ("unknown_qids",)})
    sess.counters.update({
        "questions": len(sess.outcomes), "answered": len(records), "failed": len(errors),
        "missing": sum(isinstance(e, MissingResponseError) for e in errors),
        "duplicate_qids": sum(isinstance(e, DuplicateResponseError) for e in errors),
        "empty_answers": sum(not r.record.answer.strip() for r in records),
        "contexts": sum(len(r.contexts) for r in records),
        **{f"contexts_{'unmatched' if how == 'unmatched' else 'matched_' + how}": n
           for how, n in total_counts(records).items()},
    })
    steps = [step for r in records for step in r.steps]
    if steps:  # agents' trajectories: each step a hop (docs/multi-step.md)
        sess.counters.update({"trajectory_steps": len(steps),
                              "trajectory_contexts": sum(len(s) for s in steps),
                              "trajectory_contexts_unmatched": sum(m.chunk_id is None for s in steps for m in s)})


# above this share of a job's contexts matching no chunk, a warning (retrieval/* ranks the matched ones only)
WARN_UNMATCHED = 0.2


def check_matched(sess: Session, kind: str) -> None:
    """Warns, with the count and the fix, when more than ``WARN_UNMATCHED`` of the system's contexts
    match no chunk of the dataset. When none matches although they carry ids, a ConfigError fails the
    job: ids that name nothing of the dataset are another dataset's or another chunking's, and every
    retrieval metric would be 0 (the mismatch, not the system). Text-only contexts that match nothing
    only warn: the context and answer metrics, which read their text, still hold."""
    total, unmatched = sess.counters.get("contexts", 0), sess.counters.get("contexts_unmatched", 0)
    if not total or unmatched <= total * WARN_UNMATCHED:
        return
    ids = [m.context.id for o in sess.outcomes.values() if o.matched is not None
           for m in o.matched.contexts if m.context.id is not None and m.chunk_id is None]
    what = f"system={kind}: {unmatched} of {total} contexts"
    fix = ("fix: give contexts the dataset's chunk, document or paragraph ids, or its",
           "passages as text (an export: read back with the run's dataset and chunker)")
    if unmatched == total and ids:
        raise ConfigError(f"{what} match no chunk of the dataset (ids like {ids[0]!r}): every retrieval "
                          "metric would be 0; fix: give the dataset's chunk, document or paragraph ids, or "
                          "leave ids out to match by text (a ragbench export: read it back with the run's "
                          "dataset and chunker)")
    log.warning("%s (%.0f%%) match no chunk of the dataset:\n  retrieval/* ranks only the matched ones\n"
                "  %s\n  %s", what, 100 * unmatched / total, *fix)


def _outcome(source: Source, query: Query) -> Outcome:
    found = session(source.identity).outcomes.get(query.qid)
    if found is None:
        raise ConfigError("the system's contexts and answer come from retrieval=system; fix: keep retrieval=system, "
                          "or use ragbench's expander (expander=parent) with ragbench's retrieval")
    if found.error is not None:
        raise found.error
    return found


def _check_retriever(retrieved_by: str | None, what: str) -> bool:
    return retrieved_by in (None, RETRIEVER)


class SystemExpander:
    """The contexts are the system's own passages, in its order (matched or not); ``expander=parent``
    instead expands the matched chunks (after any reranker) as for a native retriever."""

    parent_depth = 0
    max_context_tokens = None

    def __init__(self, *, source: Source, retrieved_by: str | None = None) -> None:
        if not _check_retriever(retrieved_by, "expander"):
            raise ConfigError(f"expander=system shows the system's own contexts, but retrieval is {retrieved_by}; "
                              "fix: expander=parent (ragbench's contexts), or retrieval=system")
        self.source = source

    def expand(self, hits: Sequence[Hit], tree: ChunkTree) -> list[Context]:
        raise ConfigError("expander=system needs the question (ragbench.protocols.QueryExpander); fix: update ragbench")

    def expand_query(self, query: Query, hits: Sequence[Hit], tree: ChunkTree) -> list[Context]:
        matched = _outcome(self.source, query).matched
        assert matched is not None
        out: list[Context] = []
        for n, m in enumerate(matched.contexts, start=1):
            if not m.context.text:
                continue  # an id-only context that named no chunk: nothing to read (counted unmatched)
            if m.chunk_id is None:
                out.append(Context(chunk_id=f"system:{query.qid}:{n}", text=m.context.text, title="",
                                   level=Level.PARAGRAPH, hit_ids=()))
            else:
                chunk = tree[m.chunk_id]
                out.append(Context(chunk_id=m.chunk_id, text=m.context.text, title=chunk.heading[0] if chunk.heading
                                   else "", level=chunk.level, hit_ids=(m.chunk_id,)))
        return out


class SystemGenerator:
    """The system's answer: the one it gave with its own contexts (``retrieval=system``), or, with ragbench's
    retrieval, the system asked again with ragbench's contexts."""

    def __init__(self, *, source: Source, retrieved_by: str | None = None, max_concurrency: int | None = None) -> None:
        self.source = source
        self.own = _check_retriever(retrieved_by, "llm")
        if not self.own and source.kind == "responses":
            raise ConfigError(f"system=responses holds answers written from the system's own contexts; with retrieval "
                              f"{retrieved_by} they would be scored against other contexts; fix: retrieval=system")
        self.max_concurrency = max_concurrency or _workers(source)
        self.identity = f"system:{source.kind}:{source.identity}:" + ("own" if self.own else "given_contexts")
        self.model = self.identity

    def answer(self, query: Query, contexts: Sequence[Context]) -> Answer:
        rep = repeats.current()
        if self.own and rep is not None and rep[0] > 0:  # repeats=N: asked again; retrieval is the first ask's
            record = self.source.record(query)
        elif self.own:
            matched = _outcome(self.source, query).matched
            assert matched is not None
            record = matched.record
        else:
            record = self.source.record(query, list(contexts))  # type: ignore[call-arg]
        return Answer(text=record.answer, model=self.identity, latency_s=(record.latency_ms or 0.0) / 1000.0,
                      usage=record.usage, citations=record.citations)


# system_metrics' keys: the session's counters (answered, failed, missing, duplicate_qids, unknown_qids,
# empty_answers, questions, contexts, contexts_matched_id|exact|soft, contexts_unmatched)
METRICS = {
    "system/<name>": MetricInfo("how an external RAG system's questions went and how its contexts matched the "
                                "dataset (retrieval metrics rank the matched contexts only)", "ragbench.systems",
                                kind="diagnostic", job_level="a count", unit="count"),
}


def system_metrics(retriever: object) -> dict[str, float]:
    """``system/*``: how the system's questions went (answered, failed, missing, duplicate and unknown qids,
    empty answers) and how its contexts matched the dataset (``contexts_matched_id|exact|soft``,
    ``contexts_unmatched``): the retrieval metrics rank the matched ones only."""
    if not isinstance(retriever, SystemRetriever) or retriever._session is None:
        return {}
    return {f"system/{k}": float(v) for k, v in sorted(retriever._session.counters.items())}
