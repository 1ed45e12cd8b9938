"""Every metric key a job logs is declared beside its code, and what reads a key's kind, direction or sweep-table
role reads that declaration: the job's aggregation, the early-stop zeros, docs/metrics.md."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ragbench import metric_keys
from ragbench.judge import claims, scorers
from ragbench.judge.aggregate import CASE_METRICS, aggregate, is_score
from ragbench.metric_info import MetricInfo, Rank, UndeclaredMetricError, merge, resolve
from ragbench.metric_keys import BUILT_IN, built_in, markdown, metric_info
from ragbench.outcome import zero_scores
from ragbench.types import CaseResult, Query

ROOT = Path(__file__).resolve().parents[3]
LOGGED = [line for line in (Path(__file__).parent / "logged_metric_keys.txt").read_text().splitlines()
          if line and not line.startswith("#")]


def test_every_key_real_jobs_logged_has_a_built_in_declaration():
    assert len(LOGGED) > 400 and "answer/f1" in LOGGED and "retrieval/doc/ndcg_at_topk" in LOGGED
    assert [k for k in LOGGED if built_in(k) is None] == []  # none left to the RetrievalScorer declaration


def test_the_per_case_scores_are_exactly_the_declared_answer_and_judge_scores():
    # what a failed case counts 0 in: the keys the job's aggregation zero-fills (the suffix rule they replace
    # gave the same kinds on every per-case key of the jobs above)
    per_case = [k for k in LOGGED if resolve(CASE_METRICS, k) is not None and not k.startswith("by_")
                and not k.endswith("_successful")]
    assert {k for k in per_case if is_score(k)} == {
        "answer/em", "answer/f1", "answer/contains", "answer/locomo_f1", "answer/locomo_f1_official",
        "judge/score", "judge/accuracy", "judge/correctness", "judge/faithfulness", "judge/relevance",
        *(f"judge/rf/{k}" for k in ("context_relevance", "context_precision", "context_ap", "context_ndcg",
                                    "faithfulness", "answer_relevance")),
        *(f"judge/claims/{k}" for k in ("precision", "recall", "f1", "faithfulness", "context_utilisation"))}
    for key in ("retrieval/hit_at_5", "retrieval/doc/ndcg_at_10", "context/tokens", "judge/judge_failed",
                "judge/rf/prompt_tokens", "judge/claims/hallucination", "answer/refused", "answer/citation_hit_rate"):
        assert not is_score(key)


def test_derived_keys_read_their_base_declaration():
    f1 = metric_info("answer/f1")
    assert metric_info("by_type/multi_hop/answer/f1") is f1 and metric_info("by_difficulty/easy/answer/f1") is f1
    twin = metric_info("by_type/x/answer/f1_successful")
    assert twin.kind == "diagnostic" and twin.higher_is_better and "cases that ran" in twin.definition
    assert metric_info("headline/answer_f1").kind == "score"
    assert not metric_info("headline/failure_rate").higher_is_better
    assert metric_info("retrieval/hit_at_topk") is metric_info("retrieval/hit_at_5")
    assert metric_info("latency/generate_p95_ms").job_level.startswith("the 95th percentile")
    with pytest.raises(UndeclaredMetricError, match="'retrieval/hit_at_5_successful' has no declaration"):
        metric_info("retrieval/hit_at_5_successful")  # a diagnostic has no successful-only twin


def test_a_key_is_declared_once_and_the_scorer_declaration_comes_last():
    assert list(metric_keys.DECLARED)[-1] == "retrieval/<name>" == next(iter(scorers.METRICS))
    assert built_in("retrieval/r_precision") is None and metric_info("retrieval/r_precision").kind == "diagnostic"
    with pytest.raises(ValueError, match="declared twice, differently"):
        merge({"a/b": MetricInfo("x", "s")}, {"a/b": MetricInfo("y", "s")})
    assert merge({"a/b": MetricInfo("x", "s")}, {"a/b": MetricInfo("x", "s")}) == {"a/b": MetricInfo("x", "s")}
    with pytest.raises(ValueError, match="Rank.role"):
        Rank("answer/f1", "best")


def test_docs_metrics_md_holds_the_tables_the_declarations_generate():
    text = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    begin, end = text.index(metric_keys.MARKDOWN_BEGIN), text.index(metric_keys.MARKDOWN_END)
    assert text[begin:end + len(metric_keys.MARKDOWN_END) + 1] == markdown(), (
        "docs/metrics.md's metric tables differ from the declarations; fix: replace them with the output of "
        "`python -m ragbench.metric_keys --markdown`")
    # one row per declared name
    assert sum(line.startswith("| `") for line in markdown().splitlines()) == len(metric_keys.DECLARED) - len(metric_keys.RETIRED)
    assert "| `answer/f1` | score | higher | mean over the attempted cases, a failed or unscored case 0 |" in markdown()


def test_the_cli_prints_the_tables(capsys):
    assert metric_keys.main(["--markdown"]) == 0
    assert capsys.readouterr().out == markdown()


def _case(qid: str, scores: dict[str, float], status: str = "ok") -> CaseResult:
    return CaseResult(query=Query(qid=qid, text="q", answers=("a",), question_type="t"), hits=(), contexts=(),
                      answer=None, scores=scores, status=status)


def test_a_job_stopped_before_any_case_zero_fills_its_scores_only():
    judge = SimpleNamespace(score_keys=tuple(f"{claims.PREFIX}/{k}" for k in claims.KEYS))
    zeros = zero_scores([judge])
    # hallucination is lower-is-better: a 0 would be its best value, for a job that judged nothing
    assert set(zeros) == {"judge/claims/precision", "judge/claims/recall", "judge/claims/f1",
                          "judge/claims/faithfulness", "judge/claims/context_utilisation"}
    # the same keys as the aggregation of a job whose every case failed
    assert aggregate([_case("a", {}, status="failed")], judge.score_keys).keys() >= zeros.keys()
    assert "judge/claims/hallucination" not in aggregate([_case("a", {}, status="failed")], judge.score_keys)


def test_an_undeclared_per_case_key_stops_the_aggregation_with_the_fix():
    with pytest.raises(UndeclaredMetricError, match="'answer/bleu' has no declaration; fix: declare it"):
        aggregate([_case("a", {"answer/bleu": 0.5})])


def test_every_built_in_declaration_names_its_definition_and_source():
    for name, info in BUILT_IN.items():
        assert info.definition and info.source, name
        assert info.kind in ("score", "diagnostic") and (info.higher_is_better or info.kind == "diagnostic"), name


def test_keys_earlier_versions_logged_stay_readable():
    """A run logged before ``retrieval/mrr`` became ``retrieval/mrr_at_10`` is still compared and verified:
    its retired keys have a declaration (never shown in docs/metrics.md: no job logs them now)."""
    for key in ("retrieval/mrr", "by_type/temporal/retrieval/mrr", "retrieval/chunk/mrr", "headline/mrr"):
        assert metric_keys.metric_info(key).higher_is_better
    assert "`retrieval/mrr`" not in metric_keys.markdown()
