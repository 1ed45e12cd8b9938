"""Runs against baselines: pairing by case id, failed cases, directions, Holm, the gate, refusals."""

from __future__ import annotations

import numpy as np
import pytest

from ragbench import stats
from ragbench.compare.analysis import analyse
from ragbench.compare.comparison import ALL, BASELINE, regressions
from ragbench.compare.metrics import default_metrics, metric_spec
from ragbench.compare.runcases import config_label, load_baseline, save_baseline
from ragbench.errors import ConfigError
from tests.unit.compare.synth import rows, run, scores

TYPES = ["single-hop", "temporal"] * 100


def _overall(comp, run_id, metric):
    return next(r for r in comp.records if r.run == run_id and r.metric == metric and r.type == ALL)


def test_identical_runs_compare_equal():
    f1 = scores(200, 1)
    a, b = run("a", rows(f1, types=TYPES)), run("b", rows(f1, types=TYPES))
    comp, _ = analyse([a, b], metrics=["answer/f1"], baseline="a", resamples=500)
    r = _overall(comp, "b", "answer/f1")
    assert (r.delta, r.ci_low, r.ci_high, r.p_value, r.verdict) == (0.0, 0.0, 0.0, 1.0, stats.SAME)
    assert _overall(comp, "a", "answer/f1").verdict == BASELINE
    assert {x.type for x in comp.records if x.run == "b"} == {ALL, "single-hop", "temporal"}


def test_improvement_pairs_by_case_id_not_by_position():
    f1 = scores(200, 2)
    base = rows(f1, types=TYPES)
    better = rows(np.clip(f1 + 0.1, 0, 1), types=TYPES)
    better.reverse()  # another order in cases.jsonl: pairing goes by qid
    comp, _ = analyse([run("base", base), run("new", better)], metrics=["answer/f1"], baseline="base", resamples=500)
    r = _overall(comp, "new", "answer/f1")
    assert r.n == 200 and r.p_value < 0.01 and r.verdict == stats.BETTER
    assert r.delta == pytest.approx(float(np.mean(np.clip(f1 + 0.1, 0, 1) - f1)))
    assert r.ci_low == pytest.approx(r.delta, abs=0.02)  # nearly constant gain: a narrow interval


def test_failed_case_counts_zero_for_scores_but_not_for_latency():
    f1 = [1.0] * 10
    a = run("a", rows(f1))
    b = run("b", rows(f1, failed=[0, 1]))
    comp, _ = analyse([a, b], metrics=["answer/f1", "latency/generate_p50_ms"], baseline="a", resamples=200)
    f = _overall(comp, "b", "answer/f1")
    assert f.n == 10 and f.value == pytest.approx(0.8)  # the job's end-to-end rule (aggregate.is_score)
    lat = _overall(comp, "b", "latency/generate_p50_ms")
    assert lat.n == 8  # latency: successful cases only, as the job's percentiles
    assert lat.value == pytest.approx(float(np.median(np.arange(2, 10) + 10.0)))


def test_lower_is_better_metric_direction():
    n = 120
    tok = np.full(n, 100.0)
    a = run("a", rows(scores(n, 3), tokens=tok))
    b = run("b", rows(scores(n, 3), tokens=tok * 1.5 + scores(n, 4)))
    comp, _ = analyse([a, b], metrics=["context/tokens"], baseline="a", resamples=500)
    assert _overall(comp, "b", "context/tokens").verdict == stats.WORSE
    comp, _ = analyse([a, b], metrics=["context/tokens"], baseline="b", resamples=500)
    assert _overall(comp, "a", "context/tokens").verdict == stats.BETTER


@pytest.mark.parametrize("name,key,statistic,lower,zero", [
    ("answer/f1", "answer/f1", "mean", False, True),
    ("judge/accuracy", "judge/accuracy", "mean", False, True),
    ("retrieval/mrr", "retrieval/mrr", "mean", False, False),
    ("context/tokens", "context/tokens", "mean", True, False),
    ("context/evidence_text_recall_per_1k_tokens", "context/evidence_text_recall_per_1k_tokens", "mean", False,
     False),
    ("latency/generate_p50_ms", "latency/generate_ms", "p50", True, False),
    ("latency/total_p95_ms", "latency/total_ms", "p95", True, False),
    ("judge/prompt_tokens", "judge/prompt_tokens", "mean", True, False),
])
def test_metric_specs(name, key, statistic, lower, zero):
    s = metric_spec(name)
    assert (s.key, s.statistic, s.lower_is_better, s.zero_when_failed) == (key, statistic, lower, zero)


def test_default_metrics_are_the_ones_some_run_has():
    assert "judge/accuracy" not in default_metrics({"answer/f1"})
    assert default_metrics({"answer/f1", "judge/accuracy"})[:2] == ["answer/f1", "judge/accuracy"]
    # stages=retrieval: no answer/f1, no generate latency; the baseline is then picked on retrieval/hit_at_5
    assert default_metrics({"retrieval/hit_at_5", "retrieval/mrr_at_10", "context/tokens", "latency/search_ms"}) == [
        "retrieval/hit_at_5", "retrieval/mrr_at_10", "context/tokens"]
    assert default_metrics({"latency/generate_ms"}) == ["latency/generate_p50_ms"]
    # none of them: all (but the optional judge), so the comparison names what is missing
    assert default_metrics(set()) == ["answer/f1", "retrieval/hit_at_5", "retrieval/mrr_at_10", "context/tokens",
                                      "latency/generate_p50_ms"]


def test_default_baseline_is_best_on_the_ranking_metric_and_stated():
    lo, hi = run("lo", rows([0.1] * 20)), run("hi", rows([0.9] * 20))
    comp, _ = analyse([lo, hi], metrics=["answer/f1"], resamples=200)
    assert all(b.run_id == "hi" for b in comp.baseline_of.values())
    assert any("the best of 2 configurations on answer/f1" in n and "hi" in n for n in comp.notes)
    assert _overall(comp, "lo", "answer/f1").verdict == stats.WORSE


def test_datasets_grouped_each_with_its_own_baseline():
    runs = [run("l1", rows([0.2] * 10)), run("l2", rows([0.4] * 10)),
            run("q1", rows([0.3] * 10), dataset="qasper")]
    comp, _ = analyse(runs, metrics=["answer/f1"], resamples=200)
    assert {k: v.run_id for k, v in comp.baseline_of.items()} == {"l1": "l2", "l2": "l2", "q1": "q1"}


def test_partial_overlap_compared_on_intersection_and_said():
    a = run("a", rows([0.5] * 10))
    b = run("b", rows([0.5] * 6))
    comp, _ = analyse([a, b], metrics=["answer/f1"], baseline="a", resamples=200)
    assert _overall(comp, "b", "answer/f1").n == 6
    assert any("compared on the 6 cases it shares" in n for n in comp.notes)


def test_holm_stated_and_applied():
    f1 = scores(100, 5)
    runs = [run("a", rows(f1)), run("b", rows(np.clip(f1 + 0.05, 0, 1))), run("c", rows(f1 + 0.0))]
    comp, _ = analyse(runs, metrics=["answer/f1", "latency/generate_p50_ms"], baseline="a", resamples=500)
    overall = [r for r in comp.records if r.type == ALL and r.verdict != BASELINE]
    assert [r.p_holm for r in overall] == pytest.approx(stats.holm([r.p_value for r in overall]))
    assert "Holm correction over the 4 overall comparisons" in comp.correction


@pytest.mark.parametrize("case,message", [
    ("different datasets, named baseline", "compare one dataset at a time"),
    ("no shared case", "share no case id"),
    ("unknown baseline", "matches 0 of the selected runs"),
    ("unknown metric", "no per-case field of that name"),
])
def test_refusals(case, message):
    a = run("a", rows([0.5] * 5))
    other = {"different datasets, named baseline": run("b", rows([0.5] * 5), dataset="qasper"),
             "no shared case": run("b", rows([0.5] * 5, prefix="z"))}.get(case, run("b", rows([0.5] * 5)))
    kwargs = {"metrics": ["nope/metric" if case == "unknown metric" else "answer/f1"],
              "baseline": "zzz" if case == "unknown baseline" else "a"}
    with pytest.raises(ConfigError, match=message) as err:
        analyse([a, other], resamples=200, **kwargs)
    assert "\n" not in str(err.value)


def test_gate_flags_significant_regression_beyond_tolerance():
    f1 = scores(300, 6)
    base, worse = run("base", rows(f1)), run("worse", rows(np.clip(f1 - 0.1, 0, 1)))
    comp, _ = analyse([base, worse], metrics=["answer/f1"], baseline="base", resamples=500)
    assert [r.run for r in regressions(comp)] == ["worse"]
    assert regressions(comp, tolerance=0.2) == []  # within tolerance
    comp, _ = analyse([base, run("same", rows(f1))], metrics=["answer/f1"], baseline="base", resamples=500)
    assert regressions(comp) == []


def test_baseline_file_round_trip_and_matching(tmp_path):
    f1 = scores(50, 7)
    saved = [run("b1", rows(f1), name="#0 cache.dir=/x,dataset=locomo,retrieval=bm25"),
             run("d1", rows(f1 * 0.5), name="#1 cache.dir=/x,dataset=locomo,retrieval=dense")]
    path = tmp_path / "baseline.json"
    save_baseline(path, saved)
    loaded = load_baseline(path)
    assert [r.config for r in loaded] == ["dataset=locomo,retrieval=bm25", "dataset=locomo,retrieval=dense"]
    assert np.allclose(loaded[0].fields["answer/f1"], f1) and loaded[0].qids == saved[0].qids
    # a new sweep, elsewhere: each run meets the saved run of its own config
    new = [run("b2", rows(f1), name="#1 dataset=locomo,retrieval=bm25,cache.dir=/y"),
           run("d2", rows(f1 * 0.5), name="#0 dataset=locomo,retrieval=dense")]
    comp, _ = analyse(new, metrics=["answer/f1"], baseline_runs=loaded, resamples=200)
    assert {k: v.run_id for k, v in comp.baseline_of.items()} == {"b2": "b1", "d2": "d1"}
    assert all(r.delta == 0 for r in comp.records)


@pytest.mark.parametrize("content,message", [
    (None, "no such file"),
    ("{not json", "not readable JSON"),
    ('{"runs": []}', "not a ragbench baseline"),
    ('{"format": "ragbench-baseline/1", "runs": [{"cases": []}]}', "lacks 'dataset' or 'cases'"),
    ('{"format": "ragbench-baseline/1", "runs": []}', "holds no runs"),
    ('{"format": "ragbench-baseline/1", "runs": [{"dataset": "x", "cases": [{"qid": "a"}, {"qid": "a"}]}]}',
     "appears twice"),
])
def test_bad_baseline_files(tmp_path, content, message):
    path = tmp_path / "b.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_baseline(path)


def test_baseline_file_without_a_matching_run_is_refused(tmp_path):
    path = tmp_path / "b.json"
    save_baseline(path, [run("q", rows([0.5] * 5), dataset="qasper")])
    with pytest.raises(ConfigError, match="no run on dataset locomo"):
        analyse([run("a", rows([0.5] * 5))], metrics=["answer/f1"], baseline_runs=load_baseline(path))


@pytest.mark.parametrize("name,label", [
    ("#3 dataset=locomo,retrieval.topk=5", "dataset=locomo,retrieval.topk=5"),
    ("#0 cache.dir=/tmp/c,dataset=qasper,tracking.uri=sqlite:///x.db", "dataset=qasper"),
    ("#1 reranker=[cross_encoder,mmr],retrieval=bm25", "reranker=[cross_encoder,mmr],retrieval=bm25"),
    ("ragbench", "ragbench"),
])
def test_config_label(name, label):
    assert config_label(name) == label


def test_a_judge_score_one_run_never_measured_is_not_compared_as_zeros():
    """No verdict of run b parsed (its job logs no judge/correctness): b is not 'worse' on zeros, it is
    left out with a note; a failed case still counts 0 (issue 47)."""
    f1 = list(scores(20, 1))
    judged = rows(f1)
    for r in judged:
        r["judge/correctness"] = 0.5
    comp, _ = analyse([run("a", judged), run("b", rows(f1))], metrics=["judge/correctness", "answer/f1"],
                      baseline="a", resamples=200)
    assert not [r for r in comp.records if r.run == "b" and r.metric == "judge/correctness"]
    assert any("judge/correctness not compared" in n for n in comp.notes)
    assert _overall(comp, "b", "answer/f1").verdict == stats.SAME
    some = rows(f1, failed=[0])
    for r in some[1:]:
        r["judge/correctness"] = 0.5
    comp, _ = analyse([run("a", judged), run("c", some)], metrics=["judge/correctness"], baseline="a", resamples=200)
    assert _overall(comp, "c", "judge/correctness").value == pytest.approx(0.5 * 19 / 20)  # the failed case: 0


@pytest.mark.parametrize("alpha", [1e-320, 1e-9, 0.0, 1.0, float("nan")])
def test_an_alpha_no_comparison_can_use_is_one_config_error(alpha):
    a, b = run("a", rows(scores(40, 1))), run("b", rows(scores(40, 2)))
    with pytest.raises(ConfigError, match=r"^--alpha .*: use a number from 0.0001 up to 1 \(not 1\)"):
        analyse([a, b], metrics=["answer/f1"], baseline="a", resamples=200, alpha=alpha)
    comp, _ = analyse([a, b], metrics=["answer/f1"], baseline="a", resamples=200, alpha=1e-4)
    assert comp.alpha == 1e-4
