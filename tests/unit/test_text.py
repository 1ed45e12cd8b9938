"""ragbench.text: the normalisation and tokenisation shared by answer metrics and evidence matching."""

from __future__ import annotations

import pytest

from ragbench.text import normalize, split_tokens, tokens


@pytest.mark.parametrize(("text", "expected"), [
    ("", []),
    ("The cat sat.", ["cat", "sat"]),
    ("  spaced\tout\nwords ", ["spaced", "out", "words"]),
    ("Caroline's LGBTQ group", ["caroline", "s", "lgbtq", "group"]),
    ("我爱北京", ["我", "爱", "北", "京"]),  # CJK ideographs: one token each
    ("ragbench 评测 tool", ["ragbench", "评", "测", "tool"]),
    ("mixed评x", ["m", "i", "x", "e", "d", "评", "x"]),  # a token holding an ideograph is split per character
    ("café naïve", ["café", "naïve"]),  # accents are not CJK: whole tokens
])
def test_tokens_table(text: str, expected: list[str]) -> None:
    assert tokens(text) == expected
    assert split_tokens(normalize(text)) == expected


def test_normalize_joined_equals_normalizing_the_joined_text() -> None:
    """The per-part rule gives the very string ``normalize`` gives for the joined text: a table of the
    boundary cases (articles, punctuation, final sigma, combining marks, NFKC compatibility forms, CJK,
    empty and blank parts) and 20,000 random joins of them."""
    import random

    from ragbench.text import normalize_joined

    parts = ["", " ", "\t\n", "The", "the end", "a", "an.", "A cat", "ends with the", "the", "ΟΔΟΣ", "Σ",
             "'Σ", "Σ'", "ς", "\u0301", "e\u0301", "\u0301abc", "ﬁne", "Ａｂｃ", "①", "ﾞ", "゛", "か", "\u3099",
             "評価", "x评", "…", "“quoted”", "—dash—", "İstanbul", "ǅ", "ﬀ", "\u00a0nbsp\u00a0", "D1:3",
             "Caroline's", "[D2:7]", "and", "AN", "tHe", "a.b", "-", "x" * 30]
    table = [[], [""], ["", ""], ["a", "b"], ["the", "a"], ["Σ", "Σ"], ["ΟΔΟ", "Σ"], ["e", "\u0301"],
             ["か", "\u3099"], ["the end", "the"], [" ", "the", " "]]
    rng = random.Random(11)
    table += [rng.choices(parts, k=rng.randint(1, 6)) for _ in range(20_000)]
    for texts in table:
        assert normalize_joined(texts) == normalize(" ".join(texts)), texts
