"""Sentence splitting that keeps abbreviations, initials and decimals whole and splits CJK punctuation."""

from __future__ import annotations

import re

ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st vs etc e.g i.e cf al fig figs eq eqs no nos vol pp ch sec approx dept
    inc ltd co corp jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k a.m p.m ph.d b.sc m.sc""".split()
)
# a sentence end: terminal punctuation, optional closing quotes/brackets, then whitespace
_LATIN_END = re.compile(r"[.!?]+[\"'”’)\]]*\s+")
_CJK_END = re.compile(r"[。！？；][”’」』）]*")
_WORD_BEFORE = re.compile(r"(\S+)$")
_DOTTED = re.compile(r"(?:[a-z]\.)+[a-z]")


def _is_abbreviation(text_before: str) -> bool:
    m = _WORD_BEFORE.search(text_before)
    if not m:
        return False
    word = m.group(1).lower().rstrip(".").lstrip("(\"'")
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
    """``text`` cut at word boundaries into pieces of at most ``max_chars`` (CJK cut anywhere)."""
    if len(text) <= max_chars:
        return [text]
    pieces: list[str] = []
    rest = text
    while len(rest) > max_chars:
        cut = rest.rfind(" ", 0, max_chars + 1)
        if cut <= max_chars // 2:
            cut = max_chars
        pieces.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    if rest:
        pieces.append(rest)
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
