"""AnswerContains (BERGEN's Match) and MultiHop-RAG's document-level EvidenceRecall@K, hand-worked."""

from __future__ import annotations

import pytest

from ragbench.judge.lexical import answer_scores
from ragbench.judge.retrieval import doc_recall_scores
from ragbench.judge.squad import max_over_golds, squad_contains


@pytest.mark.parametrize(("answer", "gold", "expected"), [
    ("It was in Paris, France.", "paris", 1.0),          # case and punctuation normalised
    ("The Eiffel Tower", "eiffel tower", 1.0),           # article removed on both sides
    ("Parisian cafes", "paris", 0.0),                    # whole tokens only, not substrings
    ("7 May 2023", "May 7", 0.0),                        # order matters
    ("anything", "", 0.0),                               # an empty gold is never contained
    ("", "paris", 0.0),
])
def test_squad_contains(answer: str, gold: str, expected: float) -> None:
    assert squad_contains(answer, gold) == expected


def test_contains_is_max_over_golds_and_reported_beside_em_f1() -> None:
    assert max_over_golds(squad_contains, "she moved to Berlin", ["Munich", "Berlin"]) == 1.0
    scores = answer_scores("She moved to Berlin in 2019", ["Berlin"])
    assert scores["answer/contains"] == 1.0 and scores["answer/em"] == 0.0 and 0 < scores["answer/f1"] < 1


def test_doc_recall_by_source_article() -> None:
    ranked_docs = ["a", "a", "c", "b", "d"]
    out = doc_recall_scores(ranked_docs, ["b", "c"], [1, 3, 5])
    assert out == {"retrieval/doc_recall_at_1": 0.0, "retrieval/doc_recall_at_3": 0.5,
                   "retrieval/doc_recall_at_5": 1.0}
    assert doc_recall_scores(ranked_docs, [], [1]) == {}


def test_difficulty_breakdown_beside_type() -> None:
    from ragbench.judge.aggregate import aggregate
    from ragbench.types import CaseResult, Query

    def case(qid: str, diff: str | None, f1: float) -> CaseResult:
        meta = {"difficulty": diff} if diff else {}
        return CaseResult(query=Query(qid=qid, text="?", answers=("a",), question_type="fact", meta=meta),
                          hits=(), contexts=(), answer=None, scores={"answer/f1": f1})

    out = aggregate([case("1", "easy", 1.0), case("2", "easy", 0.5), case("3", "Hard", 0.0), case("4", None, 1.0)])
    assert out["by_difficulty/easy/answer/f1"] == 0.75 and out["by_difficulty/hard/answer/f1"] == 0.0
    assert out["by_difficulty/easy/cases/total"] == 2 and out["by_type/fact/cases/total"] == 4
    assert not any(k.startswith("by_difficulty/") for k in aggregate([case("5", None, 1.0)]))
