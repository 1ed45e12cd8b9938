"""EM, token F1 and the refusal heuristic on hand-worked examples."""

import pytest

from ragbench.judge.lexical import LexicalJudge, exact_match, token_f1
from ragbench.judge.refusal import is_refusal
from ragbench.text import normalize
from ragbench.types import Answer, Query


def q(answers, answerable=True):
    return Query(qid="q", text="?", answers=tuple(answers), question_type="t", answerable=answerable)


def test_normalize_drops_case_punctuation_articles():
    assert normalize("The  Cat, sat on A mat!") == "cat sat on mat"


def test_exact_match_after_normalisation():
    assert exact_match("7 May, 2023.", "7 may 2023") == 1.0
    assert exact_match("7 May 2023", "8 May 2023") == 0.0


def test_token_f1_hand_worked():
    # pred tokens: [cat, sat, on, mat] ; gold: [cat, sat] -> common 2, P=2/4, R=2/2, F1=2*.5*1/1.5=2/3
    assert token_f1("the cat sat on the mat", "a cat sat") == pytest.approx(2 / 3)
    # repeated tokens count with multiplicity: pred [a1 a1 b], gold [a1 b b] -> common {a1:1,b:1}=2, P=R=2/3
    assert token_f1("x x y", "x y y") == pytest.approx(2 / 3)
    assert token_f1("nothing shared", "else entirely") == 0.0
    assert token_f1("", "") == 1.0


def test_judge_takes_max_over_gold_answers():
    scores = LexicalJudge().judge(q(["Paris", "the city of Paris"]), [], Answer(text="city of Paris", model="m"))
    assert scores["answer/em"] == 1.0  # matches the second gold exactly
    assert scores["answer/f1"] == 1.0
    assert scores["answer/refused"] == 0.0


def test_refusal_heuristic_scores_matching_refusals_as_correct():
    judge = LexicalJudge()
    unanswerable = q(["Not mentioned"], answerable=False)
    assert judge.judge(unanswerable, [], Answer(text="Not mentioned", model="m"))["answer/f1"] == 1.0
    assert judge.judge(unanswerable, [], Answer(text="Paris", model="m"))["answer/f1"] == 0.0
    # Qasper-style: one annotator says Unanswerable, another answers: either may match
    mixed = q(["Unanswerable", "BERT"])
    assert judge.judge(mixed, [], Answer(text="The context does not mention it.", model="m"))["answer/f1"] == 1.0
    assert judge.judge(mixed, [], Answer(text="BERT", model="m"))["answer/em"] == 1.0
    # an answerable question answered with a refusal scores zero
    assert judge.judge(q(["BERT"]), [], Answer(text="Not mentioned", model="m"))["answer/f1"] == 0.0


@pytest.mark.parametrize("text,expected", [
    ("Not mentioned", True), ("not mentioned in the conversation.", True), ("Unanswerable", True),
    ("No/insufficient information", True), ("", True), ("I don't know", True),
    ("Paris", False), ("The unknown soldier was buried in a tomb in Arlington after the long war ended "
                       "in the winter of that year", False),
])
def test_is_refusal(text, expected):
    assert is_refusal(text) is expected
