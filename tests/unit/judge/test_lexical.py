"""SQuAD v1.1 EM/F1, LoCoMo's official F1, OpenViking's check_recall and the refusal heuristic, on
hand-worked cases and on the official scripts' own rules (re-derived in the docstrings below)."""

import pytest

from ragbench.judge.lexical import LexicalJudge, answer_scores
from ragbench.judge.locomo_f1 import locomo_normalize, locomo_score, multi_answer_f1, stemmed_f1
from ragbench.judge.openviking import check_recall, openviking_normalize, render_resource
from ragbench.judge.refusal import is_refusal
from ragbench.judge.squad import max_over_golds, squad_em, squad_f1, squad_normalize
from ragbench.types import Answer, Query


def q(answers, answerable=True, meta=None):
    return Query(qid="q", text="?", answers=tuple(answers), question_type="t", answerable=answerable,
                 meta=meta or {})


# ---------------------------------------------------------------- SQuAD v1.1
@pytest.mark.parametrize("text,expected", [
    ("The  Cat, sat on A mat!", "cat sat on mat"),
    ("I've", "ive"),                       # punctuation deleted, not spaced: one token
    ("U.S.A.", "usa"),
    ("state-of-the-art", "stateoftheart"),  # the hyphens go, so "the" is no longer a word
    ("  ", ""),
    ("Anthem", "anthem"),                   # articles only as whole words
    ("café “quoted”", "café “quoted”"),     # only ASCII punctuation, as the official script
])
def test_squad_normalize(text, expected):
    assert squad_normalize(text) == expected


def test_squad_em_and_f1_hand_worked():
    assert squad_em("7 May, 2023.", "7 may 2023") == 1.0
    assert squad_em("7 May 2023", "8 May 2023") == 0.0
    # pred [cat sat on mat], gold [cat sat]: common 2, P=2/4, R=1 -> 2/3
    assert squad_f1("the cat sat on the mat", "a cat sat") == pytest.approx(2 / 3)
    assert squad_f1("x x y", "x y y") == pytest.approx(2 / 3)  # multiplicity counts
    assert squad_f1("I've gone", "I ve gone") == pytest.approx(0.4)  # [ive gone] vs [i ve gone]: 1 shared
    assert squad_f1("nothing shared", "else entirely") == 0.0
    # two empty strings: the official script scores F1 0 (no shared token) but EM 1
    assert squad_f1("", "") == 0.0 and squad_em("", "") == 1.0
    assert max_over_golds(squad_f1, "x", []) == 0.0


def test_judge_takes_max_over_gold_answers_and_never_folds_refusals():
    judge = LexicalJudge()
    s = judge.judge(q(["Paris", "the city of Paris"]), [], Answer(text="city of Paris", model="m"))
    assert s == {"answer/em": 1.0, "answer/f1": 1.0, "answer/contains": 1.0, "answer/refused": 0.0}
    unanswerable = q(["The syllabus is silent on it"], answerable=False)
    s = judge.judge(unanswerable, [], Answer(text="Not mentioned", model="m"))
    assert s["answer/f1"] == 0.0 and s["answer/refused"] == 1.0  # a refusal is scored apart
    # Qasper's unanswerable gold is the string "Unanswerable": scored as text, as its evaluator does
    s = judge.judge(q(["Unanswerable", "BERT"]), [], Answer(text="Unanswerable", model="m"))
    assert s["answer/em"] == 1.0
    s = judge.judge(q(["Unanswerable", "BERT"]), [], Answer(text="The context does not mention it.", model="m"))
    assert s["answer/f1"] == 0.0 and s["answer/refused"] == 1.0


# ---------------------------------------------------------------- LoCoMo task_eval/evaluation.py
def test_locomo_normalize_drops_commas_and_and():
    assert locomo_normalize("Cats, dogs and the birds!") == "cats dogs birds"


def test_locomo_stemmed_f1():
    assert stemmed_f1("running dogs", "the dog runs") == 1.0  # Porter: run/run, dog/dog
    assert stemmed_f1("", "") == 0.0


def test_locomo_category_rules():
    # category 1: comma-split; mean over gold parts of the best part F1
    assert multi_answer_f1("painting, hiking", "hiking, swimming") == pytest.approx(0.5)
    assert locomo_score("painting, hiking", "hiking, swimming", 1) == pytest.approx(0.5)
    # category 3: only the gold before ';' counts
    assert locomo_score("Likely no", "Likely no; she wants to be a counselor", 3) == 1.0
    assert locomo_score("Likely no", "Likely no; she wants to be a counselor", 4) < 1.0
    # category 2 and 4: stemmed token F1 of the whole strings (commas dropped, not split)
    assert locomo_score("7 May 2023", "7 May, 2023", 2) == 1.0
    # category 5: the two phrases of the official script, case-insensitive
    assert locomo_score("Not mentioned in the chat", "x", 5) == 1.0
    assert locomo_score("No information available.", "x", 5) == 1.0
    assert locomo_score("Unanswerable", "x", 5) == 0.0
    with pytest.raises(ValueError, match="category 7"):
        locomo_score("a", "b", 7)


def test_locomo_f1_only_on_locomo():
    meta = {"category": 3}
    assert answer_scores("Likely no", ["Likely no; x"], dataset="locomo", meta=meta)["answer/locomo_f1"] == 1.0
    assert "answer/locomo_f1" not in answer_scores("Likely no", ["Likely no; x"], dataset="qasper", meta=meta)
    # category 5 only under the official key; categories 1-4 under both
    adv = answer_scores("Not mentioned in the chat", ["Not mentioned"], dataset="locomo", meta={"category": 5})
    assert "answer/locomo_f1" not in adv and adv["answer/locomo_f1_official"] == 1.0
    both = answer_scores("Likely no", ["Likely no; x"], dataset="locomo", meta=meta)
    assert both["answer/locomo_f1_official"] == both["answer/locomo_f1"] == 1.0


# ---------------------------------------------------------------- OpenViking check_recall
def test_openviking_normalize():
    assert openviking_normalize("Tom and Jerry, the cat!") == "tom jerry cat"


def test_openviking_check_recall_rules():
    texts = ["**Caroline**: I went to the LGBTQ support group. [D1:3]", "Melanie: pottery class [D7:5]"]
    assert check_recall(texts, ["D1:3", "D7:9"]) == 0.5  # dia_id strings match as raw substrings
    assert check_recall(texts, []) == 0.0                 # empty evidence scores 0
    assert check_recall(texts, ["lgbtq support group"]) == 0.0  # strict match is case-sensitive; 3 tokens: no soft
    # soft: unique tokens (and/commas dropped) of >= 4 tokens, coverage >= 0.8
    assert check_recall(texts, ["Caroline went to the support group, and LGBTQ"]) == 1.0
    # repeats count once: [went went went went support] -> unique {went, support}: too short for soft
    assert check_recall(texts, ["went went went went support"]) == 0.0
    # the article 'a' is dropped: unique {b, c, d, e}, 3 of 4 covered = 0.75 < 0.8
    assert check_recall(["a b c d"], ["a b c d e"]) == 0.0


def test_openviking_soft_threshold_edges():
    assert check_recall(["one two three four"], ["one two three four five"]) == 1.0  # 4/5 = 0.8
    assert check_recall(["one two three"], ["one two three four five"]) == 0.0       # 3/5
    assert render_resource("x", ["D1:1", "session_1"]) == "x [D1:1] [session_1]"


@pytest.mark.parametrize("text,expected", [
    ("Not mentioned", True), ("not mentioned in the conversation.", True), ("Unanswerable", True),
    ("No/insufficient information", True), ("", True), ("I don't know", True),
    ("Paris", False), ("The unknown soldier was buried in a tomb in Arlington after the long war ended "
                       "in the winter of that year", False),
])
def test_is_refusal(text, expected):
    assert is_refusal(text) is expected
