"""Text normalisation shared by answer metrics and evidence matching (SQuAD / OpenViking rules)."""

from __future__ import annotations

import re
import string
import unicodedata

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans({c: " " for c in string.punctuation + "“”‘’–—…、，。！？；：（）《》「」"})


def normalize(text: str) -> str:
    """Lower case, punctuation and English articles removed, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", str(text)).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def tokens(text: str) -> list[str]:
    """Normalised tokens; CJK characters count one token each."""
    return split_tokens(normalize(text))


def split_tokens(normed: str) -> list[str]:
    """The tokens of already ``normalize``-d text (``tokens`` without normalising twice)."""
    out: list[str] = []
    for tok in normed.split():
        if any("\u4e00" <= ch <= "\u9fff" for ch in tok):
            out.extend(tok)
        else:
            out.append(tok)
    return out
