"""Aggregation: failures count as zero end-to-end and are excluded from successful-only figures."""

import pytest

from ragbench.judge.aggregate import aggregate, end_to_end, metric_name, percentile_ms, score_keys
from ragbench.types import Answer, CaseResult, Query, Usage


def case(qtype, f1=None, refused=0.0, answerable=True, failed=False, hit=None, latency=None, tokens=0):
    scores = {}
    if hit is not None:
        scores["retrieval/hit_at_5"] = hit
        scores["retrieval/mrr_at_10"] = hit
    if f1 is not None:
        scores.update({"answer/f1": f1, "answer/em": float(f1 == 1.0), "answer/refused": refused})
    answer = None if failed else Answer(text="a", model="m", usage=Usage(prompt_tokens=tokens, completion_tokens=1))
    return CaseResult(
        query=Query(qid=f"q{id(scores)}", text="?", answers=("a",), question_type=qtype, answerable=answerable),
        hits=(), contexts=(), answer=answer, scores=scores, status="failed" if failed else "ok",
        error_type="TimeoutError" if failed else None, latency=latency or {},
    )


def test_end_to_end_vs_successful_only():
    cases = [case("x", f1=1.0, hit=1.0), case("x", f1=0.5, hit=0.0), case("y", failed=True, hit=1.0)]
    m = aggregate(cases)
    assert m["answer/f1"] == pytest.approx(1.5 / 3)          # the failure counts as zero
    assert m["answer/f1_successful"] == pytest.approx(0.75)  # and is left out here
    assert m["cases/failed"] == 1 and m["cases/total"] == 3
    assert m["cases/failure_rate"] == pytest.approx(1 / 3)
    assert m["retrieval/hit_at_5"] == pytest.approx(2 / 3)   # retrieval ran for the failed case too
    assert m["retrieval/queries_scored"] == 3
    assert m["by_type/x/answer/f1"] == pytest.approx(0.75)
    assert m["by_type/y/answer/f1"] == 0.0
    assert m["by_type/y/cases/failed"] == 1


def test_a_failed_case_scores_zero_whatever_partial_scores_it_holds():
    # the lexical judge scored F1 1.0, then the LLM judge failed: the case failed, so it counts 0
    partial = CaseResult(
        query=Query(qid="p", text="?", answers=("a",), question_type="x"), hits=(), contexts=(), answer=None,
        scores={"answer/f1": 1.0, "answer/em": 1.0, "retrieval/mrr": 0.5}, status="failed",
        error_type="LLMServerError",
    )
    ok = case("x", f1=0.5)
    m = aggregate([partial, ok])
    assert end_to_end(partial, "answer/f1") == 0.0 and end_to_end(ok, "answer/f1") == 0.5
    assert m["answer/f1"] == pytest.approx(0.25) and m["answer/em"] == 0.0
    assert m["answer/f1_successful"] == pytest.approx(0.5)
    assert m["answer/f1"] <= m["answer/f1_successful"]
    assert m["retrieval/mrr"] == 0.5  # retrieval did run: its figures are kept
    assert m["by_type/x/answer/f1"] == pytest.approx(0.25)


def test_declared_keys_are_zero_when_every_case_failed():
    class Lexical:
        score_keys = ("answer/em", "answer/f1")

    class Judge:
        score_keys = ("judge/accuracy", "judge/score")

    keys = score_keys([Lexical(), Judge()])
    assert keys == ["answer/em", "answer/f1", "judge/accuracy", "judge/score"]
    m = aggregate([case("x", failed=True), case("y", failed=True)], keys)
    assert {k: m[k] for k in keys} == dict.fromkeys(keys, 0.0)
    assert m["by_type/y/judge/accuracy"] == 0.0
    assert "answer/f1_successful" not in m  # no successful case: that figure does not exist
    assert aggregate([], keys)["answer/f1"] == 0.0


def test_refusal_accuracy_and_false_refusal_rate():
    cases = [
        case("u", f1=1.0, refused=1.0, answerable=False), case("u", f1=0.0, refused=0.0, answerable=False),
        case("a", f1=0.0, refused=1.0), case("a", f1=1.0), case("a", f1=1.0), case("a", f1=1.0),
    ]
    m = aggregate(cases)
    assert m["answer/refusal_accuracy"] == pytest.approx(0.5)
    assert m["answer/false_refusal_rate"] == pytest.approx(0.25)
    assert "answer/refused_successful" not in m  # a diagnostic, never zero-filled


def test_latency_percentiles_and_tokens():
    cases = [case("x", f1=1.0, latency={"generate": s}, tokens=10) for s in (0.1, 0.2, 0.3, 0.4)]
    m = aggregate(cases)
    assert m["latency/generate_p50_ms"] == pytest.approx(250.0)
    assert m["latency/generate_p95_ms"] == pytest.approx(385.0)  # numpy linear: 300 + 0.85*100
    assert m["tokens/prompt_total"] == 40
    assert percentile_ms([], 50) == 0.0


def test_metric_names_are_valid_mlflow_parts():
    assert metric_name("yes/no") == "yes_no"
    assert metric_name("Single Factual") == "single_factual"
    assert metric_name("metrics-generated") == "metrics-generated"


def test_locomo_official_overall_beside_the_category_1_to_4_overall():
    """LoCoMo questions of categories 4, 2, 5 (scores 1.0, 0.5, 1.0) and a failed category-5 question:
    answer/locomo_f1 (ragbench, categories 1-4) = (1.0 + 0.5) / 2; answer/locomo_f1_official (every
    question, as task_eval/evaluation_stats.py: sum / count) = (1.0 + 0.5 + 1.0 + 0) / 4."""
    from ragbench.judge.lexical import answer_scores

    def locomo(qid, category, answer, gold, failed=False):
        meta = {"category": category}
        scores = {} if failed else answer_scores(answer, [gold], dataset="locomo", meta=meta)
        return CaseResult(query=Query(qid=qid, text="?", answers=(gold,), question_type=f"c{category}", meta=meta),
                          hits=(), contexts=(), answer=None, scores=scores, status="failed" if failed else "ok")

    cases = [locomo("a", 4, "Tom", "Tom"), locomo("b", 2, "7 May", "7 May 2023"),
             locomo("c", 5, "Not mentioned.", "Not mentioned"), locomo("d", 5, "", "Not mentioned", failed=True)]
    assert "answer/locomo_f1" not in cases[2].scores and cases[2].scores["answer/locomo_f1_official"] == 1.0
    assert cases[1].scores["answer/locomo_f1"] == cases[1].scores["answer/locomo_f1_official"] == pytest.approx(0.8)
    m = aggregate(cases)
    assert m["answer/locomo_f1"] == pytest.approx((1.0 + 0.8) / 2)
    assert m["answer/locomo_f1_official"] == pytest.approx((1.0 + 0.8 + 1.0 + 0.0) / 4)
    assert m["answer/locomo_f1_official_successful"] == pytest.approx((1.0 + 0.8 + 1.0) / 3)
    assert "by_type/c5/answer/locomo_f1" not in m and m["by_type/c5/answer/locomo_f1_official"] == 0.5


def _judged(qtype, verdicts, failed=False):
    """A case the LLM judge saw: ``verdicts`` maps a rubric to its 0-1 score, or None when no reply parsed."""
    c = case(qtype, f1=0.5, failed=failed)
    scores = dict(c.scores)
    for rubric, value in verdicts.items():
        scores[f"judge/{rubric}/judge_failed"] = float(value is None)
        if value is not None:
            scores[f"judge/{rubric}"] = value
    scores["judge/judge_failed"] = float(any(v is None for v in verdicts.values()))
    return CaseResult(query=c.query, hits=(), contexts=(), answer=c.answer, scores=scores, status=c.status)


def test_a_judge_metric_no_case_produced_is_not_logged_as_zero():
    """2 of 72 verdicts parsed with SmolLM2: correctness never parsed, so it is absent, not 0.0000 (issue 47)."""
    from ragbench.judge.aggregate import coverage

    class Judge:
        score_keys = ("judge/accuracy", "judge/correctness", "judge/score")

    cases = [_judged("x", {"accuracy": 1.0, "correctness": None}), _judged("x", {"accuracy": None, "correctness": None}),
             _judged("y", {"accuracy": None, "correctness": None})]
    m = aggregate(cases, score_keys([Judge()]))
    assert "judge/correctness" not in m and "judge/correctness_successful" not in m
    assert "judge/score" not in m  # declared, never produced by this judge (no judge/score in these cases)
    assert m["judge/accuracy"] == pytest.approx(1 / 3)  # produced by one case: the unjudged ones count 0
    assert m["judge/accuracy_successful"] == 1.0
    assert "by_type/y/judge/accuracy" not in m  # no case of type y was judged
    assert coverage(m, "judge/accuracy") == pytest.approx(1 / 3) and coverage(m, "judge/correctness") == 0.0
    assert coverage(m, "by_type/x/judge/accuracy") == 0.5 and coverage(m, "by_type/y/judge/accuracy") == 0.0
    assert coverage(m, "answer/f1") is None and coverage({}, "judge/accuracy") is None  # not a judge score, an old run
    # a job whose every case failed keeps compare's rule: every declared score is 0, not absent
    dead = aggregate([_judged("x", {"accuracy": None}, failed=True)], score_keys([Judge()]))
    assert dead["judge/correctness"] == 0.0 and dead["judge/accuracy"] == 0.0
