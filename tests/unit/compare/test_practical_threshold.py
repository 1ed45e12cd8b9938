"""No verdict below a metric's practical threshold: better / worse need significance (Holm) and |delta| at least
max(absolute, relative x baseline); declared per metric family, overridable with --min-effect, stated."""

from __future__ import annotations

import json

import pytest

from ragbench import stats
from ragbench.compare.analysis import analyse
from ragbench.compare.cli import run as cli
from ragbench.compare.comparison import ALL, regressions
from ragbench.compare.metrics import MIN_EFFECTS, MinEffect, metric_family, metric_spec, parse_min_effect
from ragbench.compare.report import as_json
from ragbench.compare.runcases import from_rows
from ragbench.errors import ConfigError

N = 20


@pytest.mark.parametrize(("delta", "p", "lower", "want"), [
    (0.005, 0.001, False, stats.NEGLIGIBLE),  # significant, half the threshold
    (-0.005, 0.001, False, stats.NEGLIGIBLE),
    (0.01, 0.001, False, stats.BETTER),  # at the threshold: a verdict
    (0.57 - 0.56, 0.001, False, stats.BETTER),  # 0.009999999999999898 in floating point: still the threshold
    (-0.02, 0.001, False, stats.WORSE),
    (-0.02, 0.001, True, stats.BETTER),
    (0.5, 0.2, False, stats.SAME),  # large but not significant
    (0.005, 0.2, False, stats.SAME),
])
def test_verdict_needs_significance_and_the_threshold(delta, p, lower, want):
    assert stats.verdict(delta, p, lower_is_better=lower, alpha=0.05, min_effect=0.01) == want


def test_threshold_is_the_larger_of_absolute_and_relative():
    latency = MIN_EFFECTS["latency"]
    assert latency == MinEffect(absolute=5.0, relative=0.2)
    assert latency.at(1.7) == 5.0  # the extractive answerer's 1.7 ms: 20 % is 0.34 ms, the floor is 5 ms
    assert latency.at(100.0) == pytest.approx(20.0)  # 20 % of 100 ms
    assert MIN_EFFECTS["amount"].at(1000.0) == pytest.approx(50.0)  # 5 % of 1,000 tokens
    assert MIN_EFFECTS["score"].at(0.42) == 0.01
    assert latency.describe(" ms") == "max(5 ms, 20% of the baseline)"
    assert MIN_EFFECTS["score"].describe() == "0.01" and MinEffect().describe() == "none"


@pytest.mark.parametrize(("name", "family"), [
    ("answer/f1", "score"), ("retrieval/mrr_at_10", "score"), ("judge/accuracy", "score"),
    ("judge/claims/judge_failed", "score"), ("latency/generate_p50_ms", "latency"), ("latency/total_p95_ms", "latency"),
    ("context/tokens", "amount"), ("judge/prompt_tokens", "amount"), ("judge/rf/prompt_tokens", "amount"),
    ("context/evidence_text_recall_per_1k_tokens", "amount"), ("cost/judge_usd", "amount"),
])
def test_each_metric_has_its_familys_declared_threshold(name, family):
    assert metric_family(name) == family
    assert metric_spec(name).min_effect == MIN_EFFECTS[family]


@pytest.mark.parametrize(("text", "want"), [
    ("answer/f1=0.02", ("answer/f1", MinEffect(absolute=0.02))),
    ("context/tokens=10%", ("context/tokens", MinEffect(relative=0.1))),
    (" latency/generate_p50_ms = 0 ", ("latency/generate_p50_ms", MinEffect())),
])
def test_min_effect_option_values(text, want):
    assert parse_min_effect(text) == want


@pytest.mark.parametrize("text", ["answer/f1", "answer/f1=", "=0.1", "answer/f1=-1", "answer/f1=x", "a=nan%"])
def test_min_effect_option_refuses_with_the_fix(text):
    with pytest.raises(ValueError, match="use METRIC=VALUE"):
        parse_min_effect(text)


def _rows(f1: float, latency_ms: float) -> list[dict]:
    return [{"qid": f"q{i}", "question_type": "single-hop", "status": "ok", "answer/f1": f1,
             "latency/generate_ms": latency_ms + 0.01 * i} for i in range(N)]


def _runs(f1_fast: float = 0.6) -> list:
    # the case: an extractive answerer at 0.4 ms against one at 1.7 ms
    return [from_rows(_rows(0.5, 1.7), run_id="slow", name="slow", dataset="d", topk=5),
            from_rows(_rows(f1_fast, 0.4), run_id="fast", name="fast", dataset="d", topk=5)]


def _record(comp, metric, qtype=ALL):
    return next(r for r in comp.records if r.run == "fast" and r.metric == metric and r.type == qtype)


def test_sub_millisecond_latency_gain_is_no_finding_but_an_f1_gain_is():
    comp, _ = analyse(_runs(), metrics=["answer/f1", "latency/generate_p50_ms"], baseline="slow", resamples=2000)
    lat = _record(comp, "latency/generate_p50_ms")
    # every case 1.3 ms faster: p50 0.495 vs 1.795 ms, significant, but below max(5 ms, 20 % of 1.795 ms)
    assert lat.delta == pytest.approx(-1.3) and lat.p_holm < 0.05
    assert lat.min_effect == 5.0 and lat.verdict == stats.NEGLIGIBLE
    f1 = _record(comp, "answer/f1")  # +0.1 on every case: well above 0.01
    assert f1.delta == pytest.approx(0.1) and f1.min_effect == 0.01 and f1.verdict == stats.BETTER
    assert _record(comp, "latency/generate_p50_ms", "single-hop").verdict == stats.NEGLIGIBLE  # per type too
    assert ("latency/generate_p50_ms max(5 ms, 20% of the baseline)" in comp.practical
            and "answer/f1 0.01" in comp.practical and stats.NEGLIGIBLE in comp.practical)


def test_a_significant_f1_change_below_a_point_gets_no_verdict_and_no_regression():
    comp, _ = analyse(_runs(f1_fast=0.495), metrics=["answer/f1"], baseline="slow", resamples=2000)
    f1 = _record(comp, "answer/f1")
    assert f1.delta == pytest.approx(-0.005) and f1.p_holm < 0.05 and f1.verdict == stats.NEGLIGIBLE
    assert regressions(comp) == []  # the CI gate follows the verdict


def test_min_effect_override_is_applied_and_said():
    comp, _ = analyse(_runs(), metrics=["latency/generate_p50_ms", "answer/f1"], baseline="slow", resamples=2000,
                      min_effects={"latency/generate_p50_ms": MinEffect(), "answer/f1": MinEffect(absolute=0.2)})
    assert _record(comp, "latency/generate_p50_ms").verdict == stats.BETTER  # 0: any significant difference
    assert _record(comp, "answer/f1").verdict == stats.NEGLIGIBLE  # 0.1 < 0.2
    assert "latency/generate_p50_ms none (--min-effect)" in comp.practical
    doc = json.loads(json.dumps(as_json(comp, [])))
    assert doc["min_effects"]["answer/f1"] == {"absolute": 0.2, "relative": 0.0, "from": "--min-effect"}
    assert {r["min_effect"] for r in doc["records"] if r["metric"] == "answer/f1"} == {0.2}
    assert doc["practical"] == comp.practical


def test_min_effect_for_a_metric_not_compared_is_a_usage_error():
    with pytest.raises(ConfigError, match="--min-effect answer/em: not a compared metric"):
        analyse(_runs(), metrics=["answer/f1"], baseline="slow", min_effects={"answer/em": MinEffect()})


def test_cli_refuses_a_bad_min_effect_before_reading_the_store(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(["--min-effect", "answer/f1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragbench.compare: error: --min-effect 'answer/f1': use METRIC=VALUE") and err.count("\n") == 1
