"""SQuAD v1.1 exact match and token F1, as the official ``evaluate-v1.1.py`` computes them.

Re-derived from the official script (rajpurkar.github.io/SQuAD-explorer, evaluate-v1.1.py):
``normalize_answer`` lower-cases, *deletes* ASCII punctuation (``I've`` -> ``ive``, one token), removes
the articles a/an/the and collapses whitespace; F1 is 0 when no token is shared (so two empty
strings score F1 0 but EM 1); a question's score is the max over its gold answers.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

from ragbench.metric_info import Column, MetricInfo, Rank

_SQUAD = "SQuAD v1.1 evaluate-v1.1.py"
# ragbench.judge.lexical logs them; scores: a failed case counts 0 end to end
METRICS = {
    "answer/em": MetricInfo("1 when the normalised answer equals a normalised gold answer", f"{_SQUAD} exact_match",
                            columns=(Column("answer/em", "em", 6),)),
    # the sweep table leads with it and ranks a sweep of answering jobs on it
    "answer/f1": MetricInfo("token F1 of the normalised texts, max over the gold answers", f"{_SQUAD} f1_score",
                            columns=(Column("answer/f1", "f1", 1),), ranks=(Rank("answer/f1", "answer"),)),
    "answer/contains": MetricInfo("1 when a normalised gold answer is a whole-token run inside the answer",
                                  "BERGEN Match / MultiHop-RAG AnswerContains"),
}
_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def squad_normalize(text: str) -> str:
    """The official ``normalize_answer``: lower, remove punctuation, remove articles, fix whitespace."""
    text = "".join(ch for ch in str(text).lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def squad_em(prediction: str, gold: str) -> float:
    """1.0 when the normalised strings are equal (two empty strings are equal)."""
    return float(squad_normalize(prediction) == squad_normalize(gold))


def overlap_f1(pred: Sequence[str], ref: Sequence[str]) -> float:
    """The official scripts' token F1 (SQuAD's ``f1_score``, LoCoMo's too): overlap counted with
    repeats; 0 when no token is shared (also when both are empty)."""
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def squad_f1(prediction: str, gold: str) -> float:
    """Token F1 of the normalised texts; 0 when they share no token (also when both are empty)."""
    return overlap_f1(squad_normalize(prediction).split(), squad_normalize(gold).split())


def squad_contains(prediction: str, gold: str) -> float:
    """BERGEN's "Match" / MultiHop-RAG's AnswerContains: 1.0 when the normalised gold is a whole-token
    run inside the normalised prediction (an empty gold is never contained)."""
    ref = squad_normalize(gold)
    return float(bool(ref) and f" {ref} " in f" {squad_normalize(prediction)} ")


def max_over_golds(metric: Callable[[str, str], float], prediction: str, golds: Sequence[str]) -> float:
    """The official ``metric_max_over_ground_truths`` (0 when there is no gold answer)."""
    return max((metric(prediction, g) for g in golds), default=0.0)
