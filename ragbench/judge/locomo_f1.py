"""LoCoMo's official QA score per category (snap-research/locomo, ``task_eval/evaluation.py``).

Re-derived from ``eval_question_answering``: the normaliser drops commas, lower-cases, deletes
punctuation and the words a/an/the/and; tokens are Porter-stemmed (NLTK's ``PorterStemmer``);
category 1 (multi-hop) splits prediction and gold on commas and averages, over gold parts, the best
F1 against any predicted part; category 3 keeps the gold before its first ``;``; categories 2, 3 and
4 score the stemmed token F1; category 5 (adversarial) scores 1 when the prediction contains
"no information available" or "not mentioned" (case-insensitive), else 0.

Two overall figures (``locomo_scores``): ``answer/locomo_f1`` over categories 1-4 (ragbench's, as papers that
leave the adversarial questions out report it) and ``answer/locomo_f1_official`` over every question the
job holds, category 5 included: with ``dataset.include_adversarial=true`` (``experiment=locomo_official``) its
mean is the official overall of ``task_eval/evaluation_stats.py`` (the sum of the per-question scores of
categories 1-5 over the number of questions).
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable, Mapping
from typing import Any

from ragbench.judge.squad import overlap_f1
from ragbench.metric_info import MetricInfo

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
ADVERSARIAL_PHRASES = ("no information available", "not mentioned")


@functools.lru_cache(maxsize=1)
def _stemmer():  # noqa: ANN202 - nltk has no type stubs
    from nltk.stem import PorterStemmer

    return PorterStemmer()


def locomo_normalize(text: str) -> str:
    """``normalize_answer`` of the LoCoMo script."""
    text = "".join(ch for ch in str(text).replace(",", "").lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def stemmed_f1(prediction: str, gold: str) -> float:
    """``f1_score``: token F1 of Porter-stemmed normalised tokens (0 when none is shared)."""
    stem = _stemmer().stem
    pred = [stem(w) for w in locomo_normalize(prediction).split()]
    ref = [stem(w) for w in locomo_normalize(gold).split()]
    return overlap_f1(pred, ref)


def multi_answer_f1(prediction: str, gold: str) -> float:
    """``f1``: mean over comma-separated gold parts of the best F1 against any predicted part."""
    preds = [p.strip() for p in prediction.split(",")]
    golds = [g.strip() for g in gold.split(",")]
    return sum(max(stemmed_f1(p, g) for p in preds) for g in golds) / len(golds)


RAGBENCH_KEY = "answer/locomo_f1"  # categories 1-4
OFFICIAL_KEY = "answer/locomo_f1_official"  # every category: LoCoMo's overall when category 5 is in the job
ADVERSARIAL = 5


def not_adversarial(meta: Mapping[str, Any]) -> bool:
    """Whether a question counts in ``RAGBENCH_KEY``'s mean: every LoCoMo question but category 5."""
    return meta.get("category") != ADVERSARIAL


# per-case score keys that apply to some questions only: the job's end-to-end mean of the key is over
# the questions it applies to (failed ones counting 0), read by ragbench.judge.aggregate
SCORED_ON: dict[str, Callable[[Mapping[str, Any]], bool]] = {RAGBENCH_KEY: not_adversarial}
_SRC = "snap-research/locomo task_eval/evaluation.py eval_question_answering"
METRICS = {
    RAGBENCH_KEY: MetricInfo("the official per-category score, categories 1-4 (failed cases 0)", _SRC,
                             "leaves category 5 (adversarial) out of the mean, as papers that report 1-4"),
    OFFICIAL_KEY: MetricInfo("the official per-category score over every question, category 5 included", _SRC),
}


def locomo_scores(prediction: str, gold: str, category: int) -> dict[str, float]:
    """A question's official score under both overall keys: ``OFFICIAL_KEY`` for every category,
    ``RAGBENCH_KEY`` for categories 1-4 only (so its mean leaves category 5 out in every setting)."""
    score = locomo_score(prediction, gold, category)
    return {OFFICIAL_KEY: score} if category == ADVERSARIAL else {RAGBENCH_KEY: score, OFFICIAL_KEY: score}


def locomo_score(prediction: str, gold: str, category: int) -> float:
    """The official per-category score of one answer."""
    if category == ADVERSARIAL:
        low = prediction.lower()
        return float(any(p in low for p in ADVERSARIAL_PHRASES))
    if category == 3:
        gold = gold.split(";")[0].strip()
    if category == 1:
        return multi_answer_f1(prediction, gold)
    if category in (2, 3, 4):
        return stemmed_f1(prediction, gold)
    raise ValueError(f"LoCoMo category {category!r} is not one of 1-5")
