"""The pipeline's stage logic with toy components: scores, failures, cache reuse, parent vectors."""

from __future__ import annotations

import numpy as np
import pytest

from ragbench.cache.store import StageCache
from ragbench.errors import ConfigError
from ragbench.pipeline import Pipeline
from ragbench.retrieval.dense import FaissRetriever
from ragbench.tracking.environment import embedder_dim_tag
from ragbench.types import Level, Paragraph, Section
from tests.fixtures.components import FlakyAnswerer, fails
from tests.fixtures.toy import DIM, HashEmbedder, ToyAdapter, toy_components


def components(**over):
    return toy_components(**over)


def test_end_to_end_scores_on_toy_data():
    result = Pipeline(components()).run()
    by_qid = {c.query.qid: c for c in result.cases}
    assert by_qid["q2"].scores["retrieval/hit_at_1"] == 1.0  # the Lisbon sentence ranks first
    assert by_qid["q2"].contexts[0].chunk_id == "b#s0.p0"  # expanded to its paragraph
    assert "retrieval/mrr_at_10" not in by_qid["q3"].scores  # no evidence: not scored, counted apart
    assert result.metrics["retrieval/queries_scored"] == 2
    assert result.metrics["cases/total"] == 3 and result.metrics["cases/failed"] == 0
    assert result.counts["searchable_chunks"] == 4 and result.counts["embedded_texts"] == 4
    assert len(result.fingerprints["index_sha256"]) == 64
    # search latency: each query's share of its batch, and a sample of queries searched alone
    assert all(c.latency["search"] > 0 for c in result.cases)
    assert result.metrics["latency/search_p95_ms"] >= result.metrics["latency/search_p50_ms"] > 0
    assert result.metrics["latency/search_single_p95_ms"] >= result.metrics["latency/search_single_p50_ms"] > 0


def test_failures_are_counted_never_dropped():
    result = Pipeline(components(generator=FlakyAnswerer(fail_every=3))).run()
    failed = [c for c in result.cases if c.failed]
    assert failed and [c.query.qid for c in failed] == [q for q in ("q1", "q2", "q3") if fails(q, 3)]
    assert all(c.error_type == "TimeoutError" and c.hits for c in failed)
    assert result.metrics["cases/failed"] == len(failed) and len(result.cases) == 3


def test_cache_reuses_vectors_retrieval_and_answers(tmp_path):
    emb = HashEmbedder()
    Pipeline(components(embedder=emb), cache=StageCache(dir=str(tmp_path))).run()
    cache = StageCache(dir=str(tmp_path))
    again = Pipeline(components(embedder=emb), cache=cache).run()
    assert emb.calls == [4, 3]  # corpus and queries embedded once, by the first run only
    assert cache.hits["retrieval"] == 1 and cache.hits["answers"] == 3
    assert again.metrics["ingest/embedded_texts"] == 0
    other_k = StageCache(dir=str(tmp_path))
    Pipeline(components(embedder=emb, topk=20), cache=other_k).run()  # deeper search: vectors reused
    assert other_k.misses["retrieval"] == 1 and other_k.hits["index"] == 1 and emb.calls == [4, 3]


def test_a_cached_job_records_the_vector_width_and_no_unmeasured_latency(tmp_path):
    emb = HashEmbedder()
    first = Pipeline(components(embedder=emb), cache=StageCache(dir=str(tmp_path))).run()
    cache = StageCache(dir=str(tmp_path))
    again = Pipeline(components(embedder=emb, topk=2), cache=cache).run()  # another top-k: the same search
    assert cache.hits["retrieval"] == 1 and emb.calls == [4, 3]  # nothing searched or embedded again
    assert first.counts["embedding_dim"] == again.counts["embedding_dim"] == DIM
    assert embedder_dim_tag(dict(again.counts)) == {"ragbench.embedder_dim": str(DIM)}
    assert first.metrics["latency/search_mean_ms"] > 0
    assert not [k for k in again.metrics if k.startswith("latency/search")]  # not measured: not logged as 0


def test_parent_vectors_mean_pool_children(tmp_path):
    emb = HashEmbedder()
    retriever = FaissRetriever()
    result = Pipeline(components(embedder=emb, retriever=retriever, parent_vectors="mean")).run()
    assert result.counts["searchable_chunks"] == 4 + 3  # sentences, then paragraphs
    assert emb.calls[0] == 4  # only sentences are embedded; parents are pooled
    index = retriever._index  # noqa: SLF001 - read back the stored vectors
    vecs = index.reconstruct_n(0, index.ntotal)
    mean = vecs[0] + vecs[1]
    np.testing.assert_allclose(vecs[4], mean / np.linalg.norm(mean), rtol=1e-5)  # paragraph a#s0.p0
    direct = HashEmbedder()
    Pipeline(components(embedder=direct, parent_vectors="direct")).run()
    # 4 sentences + 3 paragraphs, but two paragraphs are one sentence long: 5 distinct texts encoded
    assert direct.calls[0] == 5
    hits = [h.chunk_id for c in result.cases for h in c.hits]
    assert any(result.tree[h].level == Level.PARAGRAPH for h in hits)


def test_topk_must_be_positive():
    with pytest.raises(ConfigError, match="retrieval.topk"):
        Pipeline(components(topk=0))


def test_each_distinct_text_is_encoded_once():
    from ragbench.pipeline import _distinct

    distinct, rows = _distinct(["Thanks!", "Wow.", "Thanks!", "Bye", "Wow."])
    assert distinct == ["Thanks!", "Wow.", "Bye"] and rows.tolist() == [0, 1, 0, 2, 1]

    class Repeated(ToyAdapter):
        def load(self):
            ev = super().load()
            doc = ev.documents[0]
            extra = Section(title="S2", paragraphs=(Paragraph("Alice adopted a cat. Thanks!"),
                                                    Paragraph("Thanks!")))
            docs = (type(doc)(doc_id=doc.doc_id, title=doc.title, sections=(*doc.sections, extra)),
                    *ev.documents[1:])
            return type(ev)(name=ev.name, documents=docs, queries=ev.queries, fingerprint="e" * 64,
                            variant=ev.variant)

    emb = HashEmbedder()
    pipe = Pipeline(components(dataset=Repeated(), embedder=emb))
    result = pipe.run()
    # 7 searchable sentences, 5 distinct: "Alice adopted a cat." and "Thanks!" appear twice
    assert result.counts["searchable_chunks"] == 7 and emb.calls[0] == 5
    assert result.counts["embedded_texts"] == 5
    assert result.metrics["cases/failed"] == 0


class _NoVotes:  # a custom reranker written before Reranker.needs_votes existed
    needs_vectors = False

    def rerank(self, query, hits, **kw):  # noqa: ANN001, ANN003
        return list(hits)


class _NoKeys:  # a custom judge that declares no score_keys
    def judge(self, query, contexts, answer):  # noqa: ANN001
        return {}


@pytest.mark.parametrize(("over", "message"), [
    ({"rerankers": [_NoVotes()]}, "reranker tests.unit.test_pipeline._NoVotes lacks ['needs_votes'] of "
                                  "ragbench.protocols.Reranker"),
    ({"judges": {"mine": _NoKeys()}}, "judge tests.unit.test_pipeline._NoKeys lacks ['score_keys'] of "
                                      "ragbench.protocols.Judge"),
    ({"parent_vectors": "max"}, "retrieval.parent_vectors='max' is not valid; choose one of ['none', 'mean', 'direct']"),
])
def test_a_component_missing_a_protocol_member_is_one_line_before_anything_runs(over, message):
    with pytest.raises(ConfigError) as err:
        components(**over)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_cut_contexts_are_counted():
    from ragbench.expand import ParentExpander

    plain = Pipeline(components()).run()
    cut = Pipeline(components(expander=ParentExpander(parent_depth=1, max_context_chars=12))).run()
    assert plain.metrics["expand/truncated_contexts"] == 0
    contexts = [ctx for c in cut.cases for ctx in c.contexts]
    assert all(len(ctx.text) <= 12 for ctx in contexts)
    assert cut.metrics["expand/truncated_contexts"] == sum(ctx.truncated for ctx in contexts) > 0


def test_stage_success_counts():
    """cases/retrieval_ok, cases/generation_ok, cases/judge_ok beside the end-to-end count (issue 44 item 7)."""
    flaky = Pipeline(components(generator=FlakyAnswerer(fail_every=3))).run().metrics
    failed = sum(fails(q, 3) for q in ("q1", "q2", "q3"))
    assert failed and flaky["cases/retrieval_ok"] == 3
    assert flaky["cases/generation_ok"] == flaky["cases/judge_ok"] == flaky["cases/successful"] == 3 - failed
    from ragbench.judge.lexical import LexicalJudge

    class Unparsed(LexicalJudge):  # q2's verdict "did not parse": judged, but not graded
        def judge(self, query, contexts, answer):
            return {**super().judge(query, contexts, answer),
                    "judge/judge_failed": float(query.qid == "q2")}

    unparsed = Pipeline(components(judges={"lexical": Unparsed()})).run().metrics
    assert unparsed["cases/generation_ok"] == 3 and unparsed["cases/judge_ok"] == 2
    retrieval_only = Pipeline(components(generator=None, judges={})).run().metrics
    assert retrieval_only["cases/retrieval_ok"] == 3
    assert "cases/generation_ok" not in retrieval_only and "cases/judge_ok" not in retrieval_only
