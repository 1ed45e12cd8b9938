"""Text normalisation shared by answer metrics and evidence matching (SQuAD / OpenViking rules)."""

from __future__ import annotations

import functools
import re
import string
import unicodedata
from collections.abc import Sequence

# The refusal phrase: the gold answer of an unanswerable question (LoCoMo's, and custom sets' without one),
# the extractive baseline's answer when nothing supports one, and what the answer prompts ask a model to say.
NOT_MENTIONED = "Not mentioned"
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_NON_WORD = re.compile(r"[^\w\s]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_CJK = re.compile("[\u4e00-\u9fff]")  # a CJK ideograph counts one token each (split_tokens)
_PUNCT = str.maketrans({c: " " for c in string.punctuation + "“”‘’–—…、，。！？；：（）《》「」"})


def normalize(text: str) -> str:
    """Lower case, punctuation and English articles removed, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", str(text)).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


@functools.lru_cache(maxsize=1 << 15)  # the hit texts of a job: each chunk's text recurs across its queries
def _normalized(text: str) -> str:
    return normalize(text)


def normalize_joined(texts: Sequence[str]) -> str:
    """``normalize(" ".join(texts))``, built from each text's (cached) normal form. Nothing in ``normalize``
    reaches across the joining space: NFKC composes nothing with a space, lower-casing's final-sigma rule
    and the article rule's word boundaries see the space the same either way, and whitespace is collapsed,
    so the normal forms of the non-empty parts joined by one space are the same string."""
    return " ".join(n for n in map(_normalized, texts) if n)


def norm_key(name: str | None) -> str:
    """Lookup form of a dataset or question-type name: ``"Single factual"`` -> ``single_factual``."""
    return _NON_ALNUM.sub("_", str(name or "").lower()).strip("_")


def loose_normalize(text: str) -> str:
    """Lower case, every non-word character as a space, whitespace collapsed: the verbatim-quote check of
    dataset statistics and custom evidence (keeps articles, unlike ``normalize``)."""
    return " ".join(_NON_WORD.sub(" ", text.lower()).split())


def tokens(text: str) -> list[str]:
    """Normalised tokens; CJK characters count one token each."""
    return split_tokens(normalize(text))


def split_tokens(normed: str) -> list[str]:
    """The tokens of already ``normalize``-d text (``tokens`` without normalising twice)."""
    if _CJK.search(normed) is None:  # the common case: whitespace tokens only
        return normed.split()
    out: list[str] = []
    for tok in normed.split():
        if any("\u4e00" <= ch <= "\u9fff" for ch in tok):
            out.extend(tok)
        else:
            out.append(tok)
    return out
