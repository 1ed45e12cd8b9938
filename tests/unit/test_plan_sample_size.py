"""``plan=true plan.pilot=RUN plan.detect=0.02``: the questions a comparison needs, from a pilot's paired sd
(ragbench.plan.sample_size); bad input is one line."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragbench.compare.power import questions_needed
from ragbench.errors import ConfigError
from ragbench.plan import cli as plan_cli
from ragbench.plan import sample_size
from tests.unit.compare.synth import rows, run


def _pilot(n: int = 40) -> list:
    rng = np.random.default_rng(5)
    base = 0.2 + 0.6 * rng.random(n)
    return [run("a", rows(base), name="#0 topk=3"), run("b", rows(base + rng.normal(0.01, 0.05, n)),
                                                        name="#1 topk=5")]


def test_plan_pilot_keys_ask_for_a_plan_and_reach_the_sample_size_planner():
    asked, path, rest = plan_cli.split_plan_args(["plan.pilot=abc", "plan.detect=0.02", "dataset=locomo"])
    assert asked and path is None
    given, rest = sample_size.split_pilot_args(rest)
    assert given == {"pilot": "abc", "detect": "0.02"} and rest == ["dataset=locomo"]


def test_questions_needed_from_the_paired_sd_of_two_pilot_runs():
    runs = _pilot()
    opts = sample_size.options({"pilot": "a,b", "detect": "0.02", "comparisons": "3"})
    metric, needs = sample_size.needs(runs, opts, first_is_baseline=True)
    assert metric == "answer/f1" and len(needs) == 1
    d = runs[1].fields["answer/f1"] - runs[0].fields["answer/f1"]
    sd = float(np.std(d, ddof=1))
    assert needs[0].diff_sd == pytest.approx(sd)
    assert needs[0].questions == questions_needed(sd, 0.02, 0.05 / 3, 0.8)
    assert needs[0].baseline == "#0 topk=3" and needs[0].pilot_n == 40


def test_one_pilot_run_takes_the_sqrt_2_bound():
    runs = _pilot()[:1]
    opts = sample_size.options({"pilot": "a", "detect": "0.05"})
    _, needs = sample_size.needs(runs, opts, first_is_baseline=True)
    sd = float(np.std(runs[0].fields["answer/f1"], ddof=1)) * math.sqrt(2)
    assert needs[0].diff_sd == pytest.approx(sd) and needs[0].baseline == ""
    assert needs[0].questions == questions_needed(sd, 0.05, 0.05, 0.8)


@pytest.mark.parametrize(("given", "says"), [
    ({"detect": "0.02"}, "plan.pilot is missing"),
    ({"pilot": "a"}, "plan.detect is missing"),
    ({"pilot": "a", "detect": "two"}, "plan.detect=two: not a number"),
    ({"pilot": "a", "detect": "-1"}, "plan.detect=-1: use a difference > 0"),
    ({"pilot": "a", "detect": "0.02", "power": "2"}, "plan.power 2.0: use a number from 0.05 to 0.999"),
    ({"pilot": "a", "detect": "0.02", "alpha": "1"}, "plan.alpha: use a number"),
    ({"pilot": "a", "detect": "0.02", "comparisons": "0"}, "plan.comparisons=0: use a whole number >= 1"),
])
def test_bad_input_is_one_line(given, says, capsys):
    assert sample_size.main(given, None) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def test_an_unknown_metric_names_the_fix():
    with pytest.raises(ConfigError, match="plan.metric=answer/nope: no per-case field"):
        opts = sample_size.options({"pilot": "a", "detect": "0.02", "metric": "answer/nope"})
        sample_size.needs(_pilot(), opts, first_is_baseline=True)
