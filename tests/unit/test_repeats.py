"""repeats=N (ragbench.repeats): the policy, reducers, pass@k / pass^k, the job's repeat metrics, and the
two-level bootstrap compare uses on case means (ragbench.stats.two_level_ci)."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest

from ragbench import stats
from ragbench.compare.comparison import compare
from ragbench.compare.metrics import metric_spec
from ragbench.compare.runcases import from_rows, repeat_values
from ragbench.errors import ConfigError
from ragbench.repeats import (
    RepeatPolicy,
    current,
    pass_at_k,
    pass_hat_k,
    reduce,
    reduce_rows,
    reduce_scores,
    repeat,
    repeat_metrics,
    repeat_policy,
)


def test_policy_from_the_config_shapes() -> None:
    assert repeat_policy(None) == RepeatPolicy()
    assert repeat_policy(3) == RepeatPolicy(n=3)
    assert repeat_policy({"n": 4, "reducer": "median", "seed": 7}) == RepeatPolicy(n=4, reducer="median", seed=7)
    assert not RepeatPolicy().on and RepeatPolicy(n=2).on
    for bad in (0, 2.5, "x", {"n": 3, "reducer": "mode"}, {"n": 3, "reduce": "mean"}, {"n": 2, "seed": -1}):
        with pytest.raises(ConfigError):
            repeat_policy(bad)


def test_reducers() -> None:
    x = [1.0, 0.0, 1.0, 1.0]
    assert reduce(x, "mean") == 0.75
    assert reduce(x, "median") == 1.0
    assert reduce(x, "max") == 1.0
    assert reduce(x, "all_correct") == 0.0
    assert reduce([1.0, 1.0], "all_correct") == 1.0
    assert math.isnan(reduce([], "mean"))
    rows = np.array([[1.0, 0.0, np.nan], [0.2, 0.4, 0.6]])
    assert reduce_rows(rows, "mean").tolist() == pytest.approx([0.5, 0.4])
    assert reduce_rows(rows, "all_correct").tolist() == pytest.approx([0.0, 0.2])
    assert reduce_scores([{"a": 1.0, "b": 0.0}, {"a": 0.0}], "max") == {"a": 1.0, "b": 0.0}
    with pytest.raises(ConfigError):
        reduce(x, "mode")


def _pass_at_k_by_enumeration(n: int, c: int, k: int) -> float:
    """The share of k-subsets of n repeats (c correct) that hold at least one correct one."""
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets)


def _pass_hat_k_by_enumeration(n: int, c: int, k: int) -> float:
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(combinations(outcomes, k))
    return sum(all(s) for s in subsets) / len(subsets)


def test_pass_at_k_and_pass_hat_k_match_the_subset_counts() -> None:
    for n in range(1, 7):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(_pass_at_k_by_enumeration(n, c, k))
                assert pass_hat_k(n, c, k) == pytest.approx(_pass_hat_k_by_enumeration(n, c, k))
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 is the share correct
    assert pass_hat_k(3, 3, 3) == 1.0 and pass_hat_k(3, 2, 3) == 0.0
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_repeat_metrics() -> None:
    cases = [[{"answer/em": 1.0, "answer/f1": 0.5}, {"answer/em": 0.0, "answer/f1": 0.7},
              {"answer/em": 1.0, "answer/f1": 0.6}],
             [{"answer/em": 0.0, "answer/f1": 0.1}, {"answer/em": 0.0, "answer/f1": 0.1},
              {"answer/em": 0.0, "answer/f1": 0.1}]]
    m = repeat_metrics(cases, 3)
    assert m["repeats/n"] == 3.0
    assert m["repeats/var/answer/f1"] == pytest.approx((np.var([0.5, 0.7, 0.6], ddof=1) + 0.0) / 2)
    assert m["repeats/var/answer/em"] == pytest.approx(np.var([1, 0, 1], ddof=1) / 2)
    assert m["repeats/pass_at_3/answer/em"] == 0.5  # the first case has a correct repeat, the second none
    assert m["repeats/pass_hat_3/answer/em"] == 0.0
    assert "repeats/pass_at_3/answer/f1" not in m  # not a 0/1 verdict
    assert repeat_metrics(cases, 1) == {}


def test_the_repeat_metrics_are_declared() -> None:
    from ragbench.metric_keys import metric_info

    for key in ("repeats/n", "repeats/var/answer/f1", "repeats/var/judge/llm/accuracy",
                "repeats/pass_at_3/answer/em", "repeats/pass_hat_5/judge/correct"):
        assert metric_info(key).kind == "diagnostic"


def test_the_repeat_in_flight_is_per_context() -> None:
    assert current() is None
    with repeat(2, seed=10):
        assert current() == (2, 12)
        with repeat(None):
            assert current() is None
    assert current() is None


def _sides(rng: np.random.Generator, n: int, reps: int, spread: float) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Case means that differ by side, each case's repeats spread around its mean by ``spread``."""
    mean_a, mean_b = rng.random(n), rng.random(n) * 0.8
    a = [m + spread * rng.standard_normal(reps) for m in mean_a]
    b = [m + spread * rng.standard_normal(reps) for m in mean_b]
    if spread == 0:
        a, b = [np.full(reps, m) for m in mean_a], [np.full(reps, m) for m in mean_b]
    return a, b


def test_two_level_ci_is_the_plain_bootstrap_when_repeats_agree() -> None:
    a, b = _sides(np.random.default_rng(1), 40, 3, 0.0)
    means_a, means_b = np.array([x.mean() for x in a]), np.array([x.mean() for x in b])
    plain = stats.bootstrap_ci(means_a, means_b, resamples=2000, seed=3)
    two = stats.two_level_ci(a, b, resamples=2000, seed=3)
    assert two == pytest.approx(plain, abs=1e-12)
    # and the paired result takes it: same interval and p-value as without repeats
    with_reps = stats.paired(means_a, means_b, resamples=2000, seed=3, repeats=(a, b, ("mean", "mean")))
    without = stats.paired(means_a, means_b, resamples=2000, seed=3)
    assert (with_reps.ci_low, with_reps.ci_high, with_reps.p_value) == pytest.approx(
        (without.ci_low, without.ci_high, without.p_value), abs=1e-12)


def test_two_level_ci_widens_with_real_repeat_variance() -> None:
    rng = np.random.default_rng(2)
    a, b = _sides(rng, 40, 3, 0.4)
    means_a, means_b = np.array([x.mean() for x in a]), np.array([x.mean() for x in b])
    plain = stats.bootstrap_ci(means_a, means_b, resamples=4000, seed=3)
    two = stats.two_level_ci(a, b, resamples=4000, seed=3)
    assert two[1] - two[0] > 1.1 * (plain[1] - plain[0])
    # both centred on the same observed difference
    centre = means_a.mean() - means_b.mean()
    assert two[0] < centre < two[1] and plain[0] < centre < plain[1]


def test_two_level_ci_reads_cases_of_unequal_repeats() -> None:
    a = [np.array([1.0, 0.0, 1.0]), np.array([0.5]), np.array([0.2, 0.4])]
    b = [np.array([0.0]), np.array([0.5]), np.array([0.3])]
    low, high = stats.two_level_ci(a, b, resamples=500, seed=0)
    assert -1.0 <= low <= high <= 1.0


def _rows(values: list[list[float]], run_reducer: str = "mean") -> list[dict]:
    rows = []
    for i, reps in enumerate(values):
        row = {"qid": f"q{i}", "question_type": "t", "status": "ok", "answer/f1": float(np.mean(reps))}
        if len(reps) > 1:
            row["repeats"] = {"reducer": run_reducer, "runs": [{"answer": "x", "scores": {"answer/f1": v}}
                                                                for v in reps]}
        rows.append(row)
    return rows


def test_compare_widens_its_interval_with_repeat_variance_and_not_without() -> None:
    rng = np.random.default_rng(5)
    base_vals = [[float(v)] for v in rng.random(30) * 0.5]
    means = rng.random(30) * 0.5 + 0.2
    noisy = [[float(np.clip(m + d, 0, 1)) for d in (-0.3, 0.0, 0.3)] for m in means]
    steady = [[float(np.mean(r))] * 3 for r in noisy]  # the same case means, no repeat variance
    spec = metric_spec("answer/f1")
    base = from_rows(_rows(base_vals), run_id="base", name="base", dataset="d")
    widths = {}
    for label, vals in (("noisy", noisy), ("steady", steady)):
        run = from_rows(_rows(vals), run_id=label, name=label, dataset="d")
        assert repeat_values(run, spec) is not None
        comp = compare([run, base], {label: base, "base": base}, [spec], resamples=2000)
        rec = next(r for r in comp.records if r.run == label and r.type == "all")
        widths[label] = rec.ci_high - rec.ci_low
    plain_run = from_rows(_rows([[float(np.mean(r))] for r in noisy]), run_id="plain", name="plain", dataset="d")
    assert repeat_values(plain_run, spec) is None
    comp = compare([plain_run, base], {"plain": base, "base": base}, [spec], resamples=2000)
    plain = next(r for r in comp.records if r.run == "plain" and r.type == "all")
    assert widths["steady"] == pytest.approx(plain.ci_high - plain.ci_low, abs=1e-12)
    assert widths["noisy"] > 1.1 * widths["steady"]


def test_the_config_shapes_compose(tmp_path) -> None:
    from omegaconf import DictConfig, OmegaConf

    from tests.fixtures.jobs import compose_cfg

    def policy(*overrides: str) -> RepeatPolicy:
        node = compose_cfg(list(overrides), tmp_path).get("repeats")
        return repeat_policy(OmegaConf.to_container(node) if isinstance(node, DictConfig) else node)

    assert policy() == RepeatPolicy()
    assert policy("repeats=3") == RepeatPolicy(n=3)
    assert policy("repeats.n=4", "repeats.reducer=all_correct", "repeats.seed=9") == RepeatPolicy(
        n=4, reducer="all_correct", seed=9)


def test_a_repeat_enters_the_request_key_and_seed_only_inside_a_repeat() -> None:
    from ragbench.cache.keys import answer_key, reply_key
    from ragbench.llm.client import REPEAT, LLMClient
    from ragbench.types import Query

    client = LLMClient(model="openai/x", api_base="http://127.0.0.1:9/v1", cache=None)
    msgs = [{"role": "user", "content": "hi"}]
    plain = client._request(msgs, {"repeat": 1})  # judge.repeats' own index stays as it is
    assert REPEAT not in plain["params"] and "seed" not in plain["params"]
    with repeat(2, seed=5):
        inside = client._request(msgs, {"repeat": 1})
        assert client._body(inside)["seed"] == 7
    assert inside["params"]["repeat"] == 1 and inside["params"][REPEAT] == 2 and inside["params"]["seed"] == 7
    assert reply_key("chat", inside) != reply_key("chat", plain)
    with repeat(None):
        assert reply_key("chat", client._request(msgs, {"repeat": 1})) == reply_key("chat", plain)
    q = Query(qid="q", text="t", answers=("a",), question_type="t")
    assert answer_key("g", q, ()) == answer_key("g", q, (), repeat=None) != answer_key("g", q, (), repeat=0)
