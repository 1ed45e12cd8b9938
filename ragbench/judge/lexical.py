"""Lexical answer metrics under named definitions (see docs/metrics.md):

- ``answer/em``, ``answer/f1``: SQuAD v1.1 EM and F1 (``ragbench.judge.squad``), max over the gold
  answers as given. An unanswerable question is scored against its gold text like any other
  (Qasper's gold is the string "Unanswerable", as in its official evaluator); whether the answer
  refused is never folded in.
- ``answer/contains``: AnswerContains (BERGEN's "Match"): 1 when a SQuAD-normalised gold answer is a
  whole-token run inside the normalised answer (``ragbench.judge.squad.squad_contains``).
- ``answer/locomo_f1`` (LoCoMo only): the official per-category score, categories 1-4; and
  ``answer/locomo_f1_official``, every category (``ragbench.judge.locomo_f1``).
- ``answer/refused``: the refusal heuristic; the job reports ``answer/refusal_accuracy`` (unanswerable
  questions refused) and ``answer/false_refusal_rate`` (answerable questions refused) from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragbench.judge.locomo_f1 import locomo_scores, stemmed_f1
from ragbench.judge.refusal import is_refusal
from ragbench.judge.squad import max_over_golds, squad_contains, squad_em, squad_f1
from ragbench.types import Answer, Context, Query

LOCOMO = "locomo"


def answer_scores(answer: str, golds: Sequence[str], *, dataset: str | None = None,
                  meta: Mapping[str, Any] | None = None) -> dict[str, float]:
    """Every lexical score of one answer: the one rule ``LexicalJudge`` and ``ragbench.verify`` share."""
    out = {
        "answer/em": max_over_golds(squad_em, answer, golds),
        "answer/f1": max_over_golds(squad_f1, answer, golds),
        "answer/contains": max_over_golds(squad_contains, answer, golds),
        "answer/refused": float(is_refusal(answer)),
    }
    category = (meta or {}).get("category")
    if dataset == LOCOMO and isinstance(category, int) and golds:
        out.update(locomo_scores(answer, golds[0], category))
    return out


class LexicalJudge:
    """SQuAD v1.1 EM/F1, LoCoMo's official F1 on LoCoMo, and the refusal flag."""

    def __init__(self, *, dataset: str | None = None) -> None:
        self.dataset = dataset

    def preflight(self) -> None:
        """Loads the stemmer before the first case (not inside its judge latency), and only for a job
        that runs: importing nltk is about 2 s of CPU that a resumed job does not need."""
        if self.dataset == LOCOMO:
            stemmed_f1("warm", "up")

    score_keys = ("answer/em", "answer/f1")  # a job whose every case failed logs them as 0

    def judge(self, query: Query, contexts: Sequence[Context], answer: Answer) -> dict[str, float]:
        return answer_scores(answer.text, query.answers, dataset=self.dataset, meta=query.meta)
