"""Lexical answer metrics: exact match and SQuAD token F1 (max over gold answers), refusal heuristic."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ragbench.judge.refusal import is_refusal
from ragbench.text import normalize
from ragbench.types import Answer, Context, Query


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised strings are equal."""
    return float(normalize(prediction) == normalize(gold))


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD token F1 between normalised texts."""
    pred, ref = normalize(prediction).split(), normalize(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    common = Counter(pred) & Counter(ref)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


class LexicalJudge:
    """EM and F1, max over gold answers. A gold answer that is a refusal ("Unanswerable", "Not
    mentioned"; every gold of an unanswerable question) scores 1 when the answer refuses too --
    OpenViking's Heuristic_Refusal_Check, and the official Qasper evaluator's rule."""

    score_keys = ("answer/em", "answer/f1")  # a job whose every case failed logs them as 0

    def judge(self, query: Query, contexts: Sequence[Context], answer: Answer) -> dict[str, float]:
        refused = is_refusal(answer.text)
        em = f1 = 0.0
        for gold in query.answers or ("",):
            if not query.answerable or is_refusal(gold):
                em, f1 = max(em, float(refused)), max(f1, float(refused))
                continue
            em = max(em, exact_match(answer.text, gold))
            f1 = max(f1, token_f1(answer.text, gold))
        return {"answer/em": em, "answer/f1": f1, "answer/refused": float(refused)}
