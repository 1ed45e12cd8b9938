"""calibrate() with in-process judges of known behaviour: verdicts, agreement, failures and each bias probe."""

from __future__ import annotations

import itertools

import pytest

from ragbench.errors import ConfigError, LLMError
from ragbench.judge.calibrate import Settings, calibrate
from ragbench.judge.labels import LabelledItem, LabelSet
from ragbench.judge.probes import PADDING


def _item(i: int, label: int, *, n_ctx: int = 1, generator: str = "openai/other", qtype: str = "t") -> LabelledItem:
    ctx = tuple((f"title {i}", f"EVIDENCE-{i}" if j == 0 else f"passage {i}.{j}") for j in range(n_ctx))
    return LabelledItem(item_id=f"i{i}", question=f"q{i}?", answer=f"answer {i} label={label}", contexts=ctx,
                        gold=(), question_type=qtype, generator=generator, labels={"faithfulness": label})


ITEMS = tuple(_item(i, i % 2, n_ctx=1 + (i % 3 == 0) * 2, qtype="ab"[i % 2]) for i in range(12))
LABELS = LabelSet(path="mem.jsonl", sha256="0" * 64, items=ITEMS)
FAST = {"resamples": 400}


class Judge:
    """Reads the human label written into the answer (a judge that always agrees) unless told otherwise."""

    def __init__(self, fn=None):
        self.fn = fn or (lambda q, ctx, a: float(a.text.split("label=")[1][0]))
        self.calls = 0

    def judge(self, query, contexts, answer):
        self.calls += 1
        score = self.fn(query, contexts, answer)
        return {} if score is None else {"judge/faithfulness": score, "judge/prompt_tokens": 10.0}


def test_a_judge_that_always_agrees():
    cal = calibrate(LABELS, {"llm": Judge()}, Settings(probes=(), **FAST))
    agr = cal.agreements["faithfulness"]
    assert agr.kappa.value == 1.0 and agr.accuracy.value == 1.0
    assert agr.confusion == ((6, 0), (0, 6))
    metrics = cal.metrics()
    assert metrics["calibration/faithfulness/kappa"] == 1.0
    assert metrics["calibration/faithfulness/n"] == 12
    assert metrics["by_type/a/calibration/faithfulness/accuracy"] == 1.0
    assert metrics["judge/prompt_tokens"] == 120.0  # usage summed over the items
    assert [r["calibration/faithfulness/agree"] for r in cal.rows] == [1.0] * 12


def test_scores_become_verdicts_at_pass_at_and_failures_count_as_fail():
    # score 0.75 passes (3 of 4), 0.5 fails; item i4 gets no verdict (a failed judgment)
    scores = {0: 0.5, 1: 0.75, 2: 0.75, 3: 1.0, 4: None}

    def fn(q, ctx, a):
        return scores.get(int(q.qid[1:]), 0.0)

    cal = calibrate(LABELS, {"llm": Judge(fn)}, Settings(probes=(), **FAST))
    verdicts = [r["verdict/faithfulness"] for r in cal.rows]
    assert verdicts[:5] == [0, 1, 1, 1, 0]
    assert cal.failed["faithfulness"] == 1
    assert cal.metrics()["calibration/faithfulness/judge_failed"] == pytest.approx(1 / 12)
    # human 0,1,0,1,0 then 1,0,1,...: agreement by hand
    human = [i % 2 for i in range(12)]
    assert cal.agreements["faithfulness"].accuracy.value == pytest.approx(
        sum(h == v for h, v in zip(human, verdicts, strict=True)) / 12)


def test_rubric_scale_rounds_to_the_rubric_scores():
    items = tuple(_item(i, label) for i, label in enumerate([0, 2, 4, 3]))
    labels = LabelSet(path="m", sha256="0", items=items)
    cal = calibrate(labels, {"llm": Judge(lambda q, c, a: int(a.text[-1]) / 4)},
                    Settings(scale="rubric", probes=(), **FAST))
    assert [r["verdict/faithfulness"] for r in cal.rows] == [0, 2, 4, 3]
    assert cal.agreements["faithfulness"].classes == (0, 1, 2, 3, 4)


def test_a_judge_call_that_fails_is_a_failed_verdict_not_a_crash():
    def fn(q, ctx, a):
        if q.qid == "i1":
            raise LLMError("judge model 'x': LLMServerError after 2 attempt(s)")
        return 1.0

    cal = calibrate(LABELS, {"llm": Judge(fn)}, Settings(probes=(), **FAST))
    assert cal.rows[1]["status"] == "failed" and cal.rows[1]["verdict/faithfulness"] == 0
    assert cal.failed["faithfulness"] == 1


def test_a_rubric_no_judge_scores_is_one_config_error():
    with pytest.raises(ConfigError, match="no chosen judge gives 'judge/faithfulness'.*judge.metrics=\\[faithfulness\\]"):
        calibrate(LABELS, {"lex": Judge(lambda q, c, a: None)}, Settings(probes=(), **FAST))


def test_position_probe_catches_a_judge_that_prefers_the_first_passage():
    # one-passage items are judged with another item's passage as a distractor before or after their own
    first_wins = Judge(lambda q, ctx, a: 1.0 if ctx[0].text == f"EVIDENCE-{q.qid[1:]}" else 0.0)
    cal = calibrate(LABELS, {"llm": first_wins}, Settings(probes=("position",), **FAST))
    probe = cal.probes["position"]
    assert probe.n == 12
    assert probe.stats["delta"].value == 1.0 and probe.stats["delta"].excludes(0.0)
    assert probe.stats["flip_rate"].value == 1.0 and probe.stats["flip_rate"].excludes(0.0)
    assert cal.metrics()["probe/position/delta_ci_low"] > 0


def test_position_probe_of_an_order_blind_judge_is_zero():
    blind = Judge(lambda q, ctx, a: 1.0 if any(c.text == f"EVIDENCE-{q.qid[1:]}" for c in ctx) else 0.0)
    cal = calibrate(LABELS, {"llm": blind}, Settings(probes=("position",), **FAST))
    assert cal.probes["position"].stats["delta"].value == 0.0
    assert not cal.probes["position"].stats["delta"].excludes(0.0)


def test_verbosity_probe_pads_only_human_passed_answers():
    seen = []

    def longer_is_better(q, ctx, a):
        seen.append(a.text)
        return 1.0 if PADDING in a.text else 0.5

    cal = calibrate(LABELS, {"llm": Judge(longer_is_better)}, Settings(probes=("verbosity",), **FAST))
    probe = cal.probes["verbosity"]
    assert probe.n == 6  # the six items labelled 1
    assert probe.stats["delta"].value == 0.5 and probe.stats["delta"].excludes(0.0)
    assert probe.stats["flip_rate"].value == 1.0
    padded = [t for t in seen if PADDING in t]
    assert all(t.count("label=1") == 2 for t in padded)


def test_repeat_probe_measures_a_judge_that_changes_its_mind():
    asked: dict[str, itertools.count] = {}
    wobbly = Judge(lambda q, ctx, a: 1.0 if next(asked.setdefault(q.qid, itertools.count())) % 2 else 0.5)
    cal = calibrate(LABELS, {"llm": wobbly}, Settings(probes=("repeat",), repeats=2, workers=1, **FAST))
    probe = cal.probes["repeat"]
    assert probe.n == 12
    assert probe.stats["std"].value == pytest.approx(0.25)  # population std of {0.5, 1.0}
    assert probe.stats["flip_rate"].value == 1.0
    steady = calibrate(LABELS, {"llm": Judge()}, Settings(probes=("repeat",), **FAST)).probes["repeat"]
    assert steady.stats["std"].value == 0.0 and steady.stats["flip_rate"].value == 0.0


def test_self_preference_probe():
    items = tuple(_item(i, 0, generator="openai/judge-a" if i < 6 else "openai/other") for i in range(12))
    labels = LabelSet(path="m", sha256="0", items=items)
    # kinder to its own model's answers: 1.0 on them, 0.0 on the others; humans failed all of them
    kind = Judge(lambda q, ctx, a: 1.0 if int(q.qid[1:]) < 6 else 0.0)
    cal = calibrate(labels, {"llm": kind}, Settings(probes=("self_preference",), **FAST), judge_model="openai/judge-a")
    bias = cal.probes["self_preference"].stats["bias"]
    assert bias.value == 1.0 and bias.excludes(0.0)
    # without answers by the judge's model the probe says why it has no value
    none = calibrate(labels, {"llm": kind}, Settings(probes=("self_preference",), **FAST), judge_model="openai/x")
    assert none.probes["self_preference"].stats == {} and "found 0 and 12" in none.probes["self_preference"].note


@pytest.mark.parametrize(("kw", "words"), [
    ({"scale": "likert"}, "scale='likert' is not valid"),
    ({"probes": ("position", "length")}, "unknown probe 'length'"),
    ({"repeats": 1}, "repeats >= 2"),
    ({"resamples": 10}, "resamples >= 100"),
])
def test_bad_settings(kw, words):
    with pytest.raises(ConfigError, match=words.replace("(", "\\(")):
        Settings(**kw)


def test_every_probe_setting_has_a_definition():
    from ragbench.judge.calibration_settings import PROBES
    from ragbench.judge.probes import DEFINITIONS

    assert tuple(DEFINITIONS) == PROBES


def test_labels_off_the_scale_are_refused_before_any_judge_is_asked():
    from ragbench.judge.labels import LabelsError

    judge = Judge()
    labels = LabelSet(path="mem.jsonl", sha256="0" * 64, items=(*ITEMS, _item(99, 5)))
    with pytest.raises(LabelsError, match=r"labels.faithfulness is 5, but scale=binary allows 0 or 1"):
        calibrate(labels, {"llm": judge}, Settings(probes=(), **FAST))
    assert judge.calls == 0
    rubric = Settings(scale="rubric", max_score=5, probes=(), **FAST)
    calibrate(labels, {"llm": Judge(lambda q, c, a: 1.0)}, rubric)  # 5 is on a 0-5 rubric


def test_zero_parseable_verdicts_say_exactly_that():
    """The judge was asked for faithfulness and none of its replies parsed (issue 47: SmolLM2 restated the
    answer): one line saying so, not "choose a judge that scores faithfulness"."""
    from ragbench.errors import JobFailedError

    class Unparsed(Judge):
        score_keys = ("judge/faithfulness",)

    with pytest.raises(JobFailedError) as info:
        calibrate(LABELS, {"llm": Unparsed(lambda q, c, a: None)}, Settings(probes=(), **FAST), judge_model="m135")
    text = str(info.value)
    assert text.startswith("0 parseable verdicts: the judge (m135) was asked for judge/faithfulness on 12 items")
    assert "no chosen judge" not in text and "\n" not in text and "fix:" in text
    calls_fail = Unparsed(lambda q, c, a: (_ for _ in ()).throw(LLMError("timeout")))  # every call failed
    with pytest.raises(JobFailedError, match="^0 parseable verdicts"):
        calibrate(LABELS, {"llm": calls_fail}, Settings(probes=(), **FAST))
