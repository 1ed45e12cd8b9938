"""Sentence splitting that keeps abbreviations, initials and decimals whole and splits CJK punctuation."""

from __future__ import annotations

import re

ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st vs etc e.g i.e cf al fig figs eq eqs no nos vol pp ch sec approx dept
    inc ltd co corp jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k a.m p.m ph.d b.sc m.sc""".split()
)
# A sentence end: terminal punctuation, optional closing quotes/brackets, then whitespace. Linear time:
# a match may only start where a punctuation run starts (the look-behind), and the possessive runs never
# give back characters, so a run of 10^6 dots is one failed attempt, not 10^6 attempts of 10^6 steps each.
# The matches are the ones of the plain pattern r"[.!?]+[\"'”’)\]]*\s+" (no shorter run could succeed).
_LATIN_END = re.compile(r"(?<![.!?])[.!?]++[\"'”’)\]]*+\s+")
_CJK_END = re.compile(r"[。！？；][”’」』）]*")
_DOTTED = re.compile(r"(?:[a-z]\.)+[a-z]")
_NON_SPACE = re.compile(r"\S")


def _is_abbreviation(text_before: str) -> bool:
    # the trailing run of non-space characters, as r"(\S+)$" finds it (its "$" also matches before one
    # final newline), without that search's quadratic scan
    text_before = text_before.removesuffix("\n")
    if not text_before or text_before[-1].isspace():
        return False
    word = text_before.rsplit(None, 1)[-1].lower().rstrip(".").lstrip("(\"'")
    if word in ABBREVIATIONS:
        return True
    # single letters are initials ("J. Smith"); dotted acronyms ("U.S.A")
    return len(word) == 1 and word.isalpha() or bool(_DOTTED.fullmatch(word))


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` in order; whitespace-trimmed, none empty."""
    text = text.strip()
    if not text:
        return []
    cuts: list[int] = []
    for m in _LATIN_END.finditer(text):
        end = m.end()
        if end >= len(text):
            continue
        nxt = text[end]
        if not (nxt.isupper() or nxt.isdigit() or nxt in "\"'“‘([" or not nxt.isascii()):
            continue
        # only the word before the dot matters: pass a short window, not the whole prefix (O(n) per cut)
        if text[m.start()] == "." and _is_abbreviation(text[max(0, m.start() - 64): m.start()]):
            continue
        cuts.append(end)
    for m in _CJK_END.finditer(text):
        if m.end() < len(text):
            cuts.append(m.end())
    out, start = [], 0
    for cut in sorted(set(cuts)):
        piece = text[start:cut].strip()
        if piece:
            out.append(piece)
        start = cut
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def split_long(text: str, max_chars: int) -> list[str]:
    """``text`` cut at word boundaries into pieces of at most ``max_chars`` (CJK cut anywhere).

    Linear time: the unsplit rest is a window ``text[start:end]``, never a copy of the remainder.
    """
    if len(text) <= max_chars:
        return [text]
    pieces: list[str] = []
    start, end = 0, len(text)  # the rest is text[start:end]; stripped on both sides after the first cut
    stripped_end = len(text.rstrip())
    while end - start > max_chars:
        found = text.rfind(" ", start, start + max_chars + 1)
        cut = found - start if found >= 0 else -1
        if cut <= max_chars // 2:
            cut = max_chars
        pieces.append(text[start:start + cut].strip())
        end = stripped_end
        nxt = _NON_SPACE.search(text, start + cut, end)
        start = nxt.start() if nxt else end
    if start < end:
        pieces.append(text[start:end])
    return [p for p in pieces if p]


def pack(sentences: list[str], max_chars: int) -> list[list[str]]:
    """Greedy groups of consecutive sentences whose joined length stays within ``max_chars``."""
    groups: list[list[str]] = []
    current: list[str] = []
    size = 0
    for s in sentences:
        if current and size + 1 + len(s) > max_chars:
            groups.append(current)
            current, size = [], 0
        current.append(s)
        size += len(s) + (1 if size else 0)
    if current:
        groups.append(current)
    return groups
