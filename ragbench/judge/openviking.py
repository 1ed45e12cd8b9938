"""OpenViking's retrieval recall (volcengine/OpenViking ``benchmark/RAG/src/core/metrics.py``,
``MetricsCalculator.check_recall``), ported so a ragbench run can sit beside OpenViking's tables.

Rules, as in the original: retrieved texts are joined with spaces; an evidence string found verbatim
(case-sensitive, raw text) in the joined text is a hit; otherwise its *unique* normalised tokens
(commas dropped, lower-cased, punctuation deleted, a/an/the/and removed) must number at least 4 and
be covered >= 0.8 by the retrieved tokens; an empty evidence list scores 0. LoCoMo evidence are dia_id
strings ("D7:5"), found because a resource renders each turn as ``text [dia_id]`` (``render_resource``).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

SOFT_THRESHOLD = 0.8
MIN_SOFT_MATCH_TOKENS = 4
_DELETE_PUNCT = str.maketrans("", "", string.punctuation)  # the original's per-character `ch not in exclude`
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")


def openviking_normalize(text: str) -> str:
    """``MetricsCalculator.normalize_answer``."""
    text = str(text).replace(",", "").lower().translate(_DELETE_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def check_recall(retrieved_texts: Sequence[str], evidence: Sequence[str], *,
                 soft_threshold: float = SOFT_THRESHOLD, min_soft_match_tokens: int = MIN_SOFT_MATCH_TOKENS) -> float:
    """Share of evidence strings hit (strict raw substring, else soft unique-token coverage)."""
    if not evidence:
        return 0.0
    joined = " ".join(retrieved_texts)
    present: set[str] | None = None  # the retrieved tokens, normalised only when a soft match needs them
    hits = 0
    for ev in evidence:
        if ev in joined:
            hits += 1
            continue
        toks = set(openviking_normalize(ev).split())
        if len(toks) < min_soft_match_tokens:  # also skips evidence with no token at all
            continue
        if present is None:
            present = set(openviking_normalize(joined).split())
        if len(toks & present) / len(toks) >= soft_threshold:
            hits += 1
    return hits / len(evidence)


def render_resource(text: str, refs: Sequence[str]) -> str:
    """A retrieved resource as OpenViking's adapters write it: the text, then each dataset id it
    holds in brackets (its LoCoMo documents end every turn with `` [D1:3]``)."""
    return text + "".join(f" [{r}]" for r in refs)
