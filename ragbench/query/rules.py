"""EasyRAG's rule-based query expansion (``query=rules``): deterministic sub-queries, no LLM.

The seed names the feature (a local rule expansion beside the LLM multi-query, on by default in
EasyRAG) but not its rules; ragbench's rules are these, each a pure function of the question text:

1. ``keywords``: the question without question words, auxiliaries and stopwords (what BM25 and a
   dense encoder should match, without "what did ... say about").
2. ``entities``: the capitalised names, quoted phrases and numbers of the question (a temporal or
   comparison question names the people, sources and dates whose passages hold the answer).
3. ``answer type``: the keywords plus words of the answer the question word asks for
   (when -> date / time, where -> place / location, who -> person / name, how many -> number / count).

A rule that yields nothing new (empty, or equal to the question or an earlier sub-query) is skipped,
so a sub-query list never repeats a text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

RULES = ("keywords", "entities", "answer_type")

QUESTION_WORDS = frozenset(
    "what which who whom whose when where why how does do did is are was were can could would should will "
    "has have had be been being".split()
)
STOPWORDS = frozenset(
    "a an the of to in on at for from by with about into over after before and or but if then than that this "
    "these those it its he she they them his her their we our you your i me my as there any some".split()
)
ANSWER_TYPES: tuple[tuple[str, str], ...] = (
    ("how many", "number count"), ("how much", "amount number"), ("how long", "duration time"),
    ("when", "date time"), ("where", "place location"), ("who", "person name"), ("why", "reason because"),
)
_WORD = re.compile(r"[\w'-]+", re.UNICODE)
_QUOTED = re.compile(r"[\"“”']([^\"“”']{2,})[\"“”']")
_NAME = re.compile(r"\b[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*")
_NUMBER = re.compile(r"\b\d[\d,.:/-]*\b")


def keywords(question: str) -> str:
    """Rule 1: the question's content words, in order."""
    words = [w for w in _WORD.findall(question) if w.lower() not in QUESTION_WORDS | STOPWORDS]
    return " ".join(words)


def entities(question: str) -> str:
    """Rule 2: quoted phrases, capitalised names (the sentence-initial question word excluded) and numbers."""
    found: list[str] = [m.group(1).strip() for m in _QUOTED.finditer(question)]
    for m in _NAME.finditer(question):
        name = " ".join(w for w in m.group(0).split() if w.lower() not in QUESTION_WORDS | STOPWORDS)
        if name:
            found.append(name)
    found.extend(m.group(0) for m in _NUMBER.finditer(question))
    return " ".join(dict.fromkeys(found))


def answer_type(question: str) -> str:
    """Rule 3: the keywords plus the answer-type words of the first question word found."""
    low = f" {' '.join(_WORD.findall(question.lower()))} "
    for cue, words in ANSWER_TYPES:
        if f" {cue} " in low:
            kw = keywords(question)
            return f"{kw} {words}".strip()
    return ""


def expand(question: str, rules: Sequence[str] = RULES) -> tuple[str, ...]:
    """The question first, then each rule's sub-query that adds a new text."""
    fns = {"keywords": keywords, "entities": entities, "answer_type": answer_type}
    out = [question]
    for rule in rules:
        text = " ".join(fns[rule](question).split())
        if text and all(text.lower() != seen.lower() for seen in out):
            out.append(text)
    return tuple(out)
