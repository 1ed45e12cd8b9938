"""Retrieval and answer metrics declare themselves; a RetrievalScorer from outside the package adds keys per
query, checked when built and recomputed by verify from the case record."""

from __future__ import annotations

import pytest

from ragbench.compare.metrics import metric_spec
from ragbench.errors import ConfigError
from ragbench.judge import scorers
from ragbench.judge.aggregate import is_score, metric_info
from ragbench.judge.metric_info import MetricInfo
from ragbench.judge.scorers import build_scorers, scorer_nodes, scorer_scores
from ragbench.metric_info import UndeclaredMetricError
from ragbench.protocols import RetrievalScorer
from ragbench.verify import recompute_case


class RPrecision:
    """R-precision over evidence units: relevant hits among the first R / R (R = relevant units)."""

    metrics = {"retrieval/r_precision": MetricInfo("relevant hits in the first R / R", "trec_eval Rprec",
                                                   kind="diagnostic")}

    def score(self, *, ranked, covered, qrels, chunk_qrels, ks):
        r = sum(g > 0 for g in qrels.values())
        hits = sum(any(qrels.get(u, 0) > 0 for u in units) for units in covered[:r])
        return {"retrieval/r_precision": hits / r if r else 0.0}


@pytest.mark.parametrize("key,kind", [
    ("retrieval/hit_at_5", "diagnostic"), ("retrieval/mrr_at_10", "diagnostic"), ("retrieval/ndcg_at_topk", "diagnostic"),
    ("retrieval/chunk/recall_at_3", "diagnostic"), ("retrieval/doc_recall_at_10", "diagnostic"),
    ("retrieval/evidence_text_recall", "diagnostic"), ("answer/em", "score"), ("answer/f1", "score"),
    ("answer/contains", "score"), ("answer/locomo_f1", "score"), ("answer/locomo_f1_official", "score"),
    ("answer/refused", "diagnostic"),
])
def test_retrieval_and_answer_keys_are_read_from_their_declaration(key, kind):
    info = metric_info(key)
    assert info is not None and info.kind == kind and info.higher_is_better and info.source
    assert is_score(key) == (kind == "score")
    spec = metric_spec(key)
    assert not spec.lower_is_better and spec.zero_when_failed == (kind == "score")


def test_undeclared_and_near_miss_keys_are_an_error_not_a_guess():
    # a diagnostic has no successful-only twin; answer/* and judge/* have no catch-all
    for key in ("retrieval/hit_at_5_successful", "answer/bleu", "judge/politeness", "context/size"):
        with pytest.raises(UndeclaredMetricError, match=f"metric '{key}' has no declaration; fix: declare it"):
            metric_info(key)
        with pytest.raises(UndeclaredMetricError):
            is_score(key)
    # a scorer's key is read by the one declaration of every RetrievalScorer key, tried after the built-in ones
    assert metric_info("retrieval/r_precision") is scorers.METRICS["retrieval/<name>"]
    assert metric_info("retrieval/hit_at_5") is not scorers.METRICS["retrieval/<name>"]


def test_a_scorer_adds_its_keys_hand_worked():
    scorer = build_scorers([{"x": 1}], lambda node: RPrecision())[0]
    assert isinstance(scorer, RetrievalScorer)
    # R = 2 relevant units (ev0, ev1); the first two hits cover ev1 and nothing: 1 / 2
    got = scorer_scores([scorer], ranked=["c1", "c2", "c3"], covered=[["ev1"], [], ["ev0"]],
                        qrels={"ev0": 1, "ev1": 2, "ev2": 0}, chunk_qrels={"c1": 2, "c3": 1}, ks=[1, 3])
    assert got == {"retrieval/r_precision": 0.5}


def test_a_scorer_that_breaks_the_contract_is_a_one_line_config_error():
    class Undeclared(RPrecision):
        def score(self, **kw):
            return {"retrieval/other": 1.0}

    class Answerish(RPrecision):
        metrics = {"answer/x": MetricInfo("d", "s", kind="diagnostic")}

    class LowerIsBetter(RPrecision):  # compare reads every scorer key as higher is better: declared so, or refused
        metrics = {"retrieval/first_rank": MetricInfo("d", "s", higher_is_better=False, kind="diagnostic")}

    class Nested(RPrecision):
        metrics = {"retrieval/mine/x": MetricInfo("d", "s", kind="diagnostic")}

    with pytest.raises(ConfigError, match=r"metrics.retrieval\[0\] \(object\) is not a RetrievalScorer"):
        build_scorers([{}], lambda node: object())
    for bad in (Answerish, LowerIsBetter, Nested):
        with pytest.raises(ConfigError, match="declare each key as 'retrieval/<name>'.*higher_is_better=True"):
            build_scorers([{}], lambda node, bad=bad: bad())
    with pytest.raises(ConfigError, match="'retrieval/other', which its `metrics` does not declare"):
        scorer_scores([Undeclared()], ranked=[], covered=[], qrels={}, chunk_qrels={}, ks=[1])


def test_verify_rebuilds_the_scorers_from_params_and_recomputes_them():
    params = {"metrics.retrieval.0._target_": "mine.RPrecision", "metrics.retrieval.0.depth": "3",
              "metrics.retrieval.0.opts.flag": "true", "retrieval.topk": "5"}
    assert scorer_nodes(params) == [{"_target_": "mine.RPrecision", "depth": 3, "opts": {"flag": True}}]
    row = {"evidence": {"matched": True, "texts": ["t"], "openviking": []}, "topk": 1, "ranked_ids": ["c1", "c2"],
           "hit_units": [["ev0"], []], "qrels": {"chunk": {"c1": 1}, "unit": {"ev0": 1}}, "topk_texts": ["t"],
           "ranked_doc_ids": ["d", "d"], "doc_ids": ["d"], "contexts": []}
    assert recompute_case(row, [RPrecision()])["retrieval/r_precision"] == 1.0
    assert "retrieval/r_precision" not in recompute_case(row)
