"""One module assembles a job's metrics; each producer declares which of its keys are scores."""

from __future__ import annotations

from ragbench.evidence import EvidenceMap
from ragbench.job_metrics import (
    Produced,
    assemble,
    case_metrics,
    exclusion_reason,
    job_metrics,
    kinds,
    logged_metrics,
    retrieval_exclusions,
)
from ragbench.judge.lexical import LexicalJudge
from ragbench.pipeline import Pipeline
from ragbench.types import CaseResult, Evidence, Query
from tests.fixtures.components import FlakyAnswerer
from tests.fixtures.toy import toy_components


def _components(**over):
    return toy_components(**over)


def test_producers_declare_scores_and_diagnostics():
    result = Pipeline(_components(generator=FlakyAnswerer(fail_every=3))).run()  # q1 and q2 fail
    assert any(c.failed for c in result.cases) and not all(c.failed for c in result.cases)
    cases = case_metrics(result.cases, [LexicalJudge()])
    assert {"answer/f1", "answer/f1_successful", "answer/em"} <= cases.scores
    assert cases.kind("retrieval/mrr_at_10") == "diagnostic" and cases.kind("cases/failed") == "diagnostic"
    qtype = next(k.split("/")[1] for k in cases.values if k.startswith("by_type/"))
    assert cases.kind(f"by_type/{qtype}/answer/f1") == "score"
    # the failed case is 0 end-to-end, left out of the successful-only figure
    f1 = [c.scores.get("answer/f1", 0.0) for c in result.cases if not c.failed]
    assert cases.values["answer/f1_successful"] == sum(f1) / len(f1)
    assert cases.values["answer/f1"] == sum(f1) / len(result.cases)
    assert {k: v for k, v in result.metrics.items() if k in cases.values} == dict(cases.values)


def test_the_logged_dict_adds_counts_dataset_times_and_top_k_views():
    result = Pipeline(_components()).run()
    logged = job_metrics(result, topk=2)
    assert {k: logged[k] for k in result.metrics} == dict(result.metrics)  # nothing of the job's changes
    assert logged["counts/queries"] == float(len(result.evalset.queries))
    assert logged["time/chunk_s"] == result.timings["chunk"]
    assert logged["retrieval/hit_at_topk"] == result.metrics["retrieval/hit_at_2"]
    assert logged["headline/answer_f1"] == result.metrics["answer/f1"]
    part = logged_metrics(result, topk=2)
    assert part.kind("headline/answer_f1") == "score" and part.kind("counts/queries") == "diagnostic"
    assert part.kind("headline/failure_rate") == "diagnostic"


def test_assemble_merges_in_order_and_kinds_follow_the_last_producer():
    a = Produced("a", {"x": 1.0, "y": 2.0}, frozenset({"x"}))
    b = Produced("b", {"y": 3.0})
    assert assemble(a, b) == {"x": 1.0, "y": 3.0}
    assert kinds(a, b) == {"x": "score", "y": "diagnostic"}


def test_retrieval_exclusions_count_every_question_once_with_its_reason():
    """The toy job scores retrieval on q1 and q2; q3 is unanswerable. Every other reason, by hand."""
    result = Pipeline(_components()).run()
    assert result.metrics["counts/retrieval_scored"] == 2 == result.metrics["retrieval/queries_scored"]
    assert result.metrics["counts/retrieval_excluded/unanswerable"] == 1
    assert all(result.metrics[f"counts/retrieval_excluded/{r}"] == 0
               for r in ("no_evidence", "evidence_not_found", "not_run"))

    def query(qid: str, *evidence: Evidence, answerable: bool = True) -> Query:
        return Query(qid=qid, text="?", answers=("x",), question_type="t", evidence=evidence, answerable=answerable)

    matched = EvidenceMap(anchors=(("d#s0",),), relevance=(1,), texts=("x",), how=("exact",))
    unmatched = EvidenceMap(anchors=((),), relevance=(1,), texts=("x",), how=("unmatched",))
    ev = Evidence(text="x")
    scored = query("a", ev)
    cases = {
        "a": CaseResult(query=scored, hits=(), contexts=(), answer=None, scores={"retrieval/mrr_at_10": 1.0}),
        "d": CaseResult(query=query("d", ev), hits=(), contexts=(), answer=None, scores={}, status="failed"),
        "e": CaseResult(query=query("e", ev), hits=(), contexts=(), answer=None,
                        scores={"retrieval/mrr_at_10": 0.5}, status="skipped"),
    }
    queries = [scored, query("b"), query("c", ev), query("d", ev), query("e", ev), query("f", ev, answerable=False)]
    emaps = {"a": matched, "b": EvidenceMap((), (), (), ()), "c": unmatched, "d": matched, "e": matched,
             "f": unmatched}
    reasons = [exclusion_reason(q, emaps.get(q.qid), cases.get(q.qid)) for q in queries]
    assert reasons == [None, "no_evidence", "evidence_not_found", "not_run", "not_run", "unanswerable"]
    assert retrieval_exclusions(queries, emaps, list(cases.values())) == {
        "counts/retrieval_scored": 1.0, "counts/retrieval_excluded/unanswerable": 1.0,
        "counts/retrieval_excluded/no_evidence": 1.0, "counts/retrieval_excluded/evidence_not_found": 1.0,
        "counts/retrieval_excluded/not_run": 2.0}
