"""Tolerant reading of a judge model's reply, and the JSON schema each reply is asked to follow.

A real model (a 135M one especially) rarely answers with the bare JSON a prompt asks for: it wraps it in a
code fence or a sentence, writes Python quotes or a trailing comma, stops mid-object at ``max_tokens``, or
restates the answer. Each reader tries, in order, and stops at the first that finds something:

1. **JSON**: the whole reply, each code fence, each balanced ``{...}`` / ``[...]`` in the prose (JSON, then
   a Python literal: single quotes, trailing commas). Objects naming the field disagreeing is ambiguous.
2. **Labelled fallbacks**: ``score: 4``, ``**Score:** 4/4``, ``the score is 2``, ``Correctness: 3``, ``The
   CORRECTNESS of the generated answer is 4.`` (SmolLM2-135M's own way), ``Verdict: yes`` (a two-valued
   scale), a numbered list of claims or of per-claim verdicts. ``The answer is 4.`` is no verdict: it may
   restate a numeric answer.
3. **A lone value**: a reply (or its first line) that is only a number in range, or only yes/no.

Nothing is guessed: two different labelled scores, a score out of range, ``4/5`` on a 0-4 scale, stray
numbers in prose ("the answer names 2 dates") or a truncated claim list read as *no value* (``how ==
"failed"``): the caller counts a failed judgment, it never scores one. The schemas (``score_schema``,
``claims_schema``, ``verdicts_schema``) are what structured output (``response_format``) and constrained
decoding ask the model to follow; every reader accepts what its schema allows.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
MAX_STARTS = 64  # braces tried per reply (a 100,000-character reply is not scanned from every brace)
_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.DOTALL)
_NUMBER = r"(-?\d+(?:\.\d+)?)"
_OUT_OF = r"(?:\s*(?:/|out\s+of)\s*(\d+))?"
_NOT_A_RANGE = r"(?![\d.]\d|\d|\s*(?:-|\u2013|to)\s*\d)"  # "a score of 0-4" restates the scale, it is no score
# "score: 4", "**Score:** 4/4", "'score' = 3", "the score is 2", "Rating of 3 out of 4"
_LABELLED = re.compile(r"""\b(?:score|rating|grade)\b\**["']?\s*(?::|=|\bis\b|\bof\b)?\s*\**\s*["']?\s*"""
                       + _NUMBER + _NOT_A_RANGE + _OUT_OF, re.IGNORECASE)
# a rubric named as the label: "Correctness: 3", "The CORRECTNESS of the generated answer is 4." (SmolLM2's way)
_NAMED = re.compile(r"\b(?:correctness|faithfulness|relevance|accuracy)\b(?:\s+of\s+the\s+(?:generated\s+)?answer)?"
                    r"\**\s*(?::|=|\bis\b)\s*\**\s*" + _NUMBER + _NOT_A_RANGE + _OUT_OF, re.IGNORECASE)
_LONE = re.compile(r"^[\s*_`\"'(\[]*" + _NUMBER + _OUT_OF + r"[\s*_`\"')\].!]*$")
YES = ("yes", "correct", "supported", "true", "right", "relevant", "faithful")
NO = ("no", "incorrect", "wrong", "not supported", "unsupported", "false", "not relevant", "irrelevant",
      "unfaithful", "not faithful")
_WORD = "|".join(re.escape(w) for w in sorted((*YES, *NO), key=len, reverse=True))
_LABELLED_WORD = re.compile(r"\b(?:verdict|judg(?:e)?ment|label|decision)\b\**\s*[:=]\s*\**\s*"
                            rf"({_WORD})\b", re.IGNORECASE)
_LONE_WORD = re.compile(rf"^[\s*_`\"']*({_WORD})[\s*_`\"'.!]*$", re.IGNORECASE)
_ITEM = re.compile(r"^\s*(?:[-*\u2022]|\(?(\d+)[.):])\s+(.+?)\s*$")
_NUMBERED = re.compile(r"^\s*(?:claim\s*)?\(?(\d+)\s*[.):\-]\s*(.*?)\s*$", re.IGNORECASE)
_VERDICT_WORD = re.compile(rf"\b({_WORD})\b|(?:^|[\s:=(\-])([01])\s*[).]?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Parsed(Generic[T]):
    """What a reader found: ``value`` (None when nothing usable) and ``how`` (json | labelled | bare |
    failed); ``text`` is the JSON object's ``reasoning`` when it had one."""

    value: T | None
    how: str
    text: str = ""


def _failed() -> Parsed[Any]:
    return Parsed(None, "failed")


def _balanced(text: str, start: int) -> str | None:
    """The bracketed span opening at ``start`` (quotes of both kinds respected), None when never closed."""
    pairs = {"{": "}", "[": "]"}
    stack: list[str] = []
    quote = ""
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in pairs:
            stack.append(pairs[ch])
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return text[start:i + 1]
    return None


def _load(candidate: str) -> Any:
    try:
        return json.loads(candidate)
    except ValueError:
        pass
    try:  # a Python literal: {'score': 4}, a trailing comma
        return ast.literal_eval(candidate)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def json_values(text: str) -> Iterator[Any]:
    """Every JSON value in a reply: the reply itself, each code fence's body, then each balanced object or
    array in the text (outermost first), as JSON or as a Python literal."""
    seen: set[str] = set()
    candidates = [text.strip(), *(m.group(1).strip() for m in _FENCE.finditer(text))]
    starts = [i for i, ch in enumerate(text) if ch in "{["][:MAX_STARTS]
    end = -1
    for i in starts:
        if i < end:
            continue  # inside an object already taken
        span = _balanced(text, i)
        if span is not None:
            candidates.append(span)
            end = i + len(span)
    for candidate in candidates:
        if not candidate or candidate in seen:
            continue
        seen.add(candidate)
        value = _load(candidate)
        if value is not None:
            yield value


def _field(data: Any, name: str) -> tuple[bool, Any]:
    """(found, value) of ``name`` in a dict, the key matched case-insensitively."""
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str) and key.strip().lower() == name.lower():
                return True, value
    return False, None


def _json_fields(text: str, name: str) -> list[tuple[Any, Any]]:
    """(value of ``name``, the object) for every JSON object in the reply that has the field."""
    out = []
    for data in json_values(text):
        found, value = _field(data, name)
        if found:
            out.append((value, data))
    return out


def _score(value: Any, allowed: Collection[int], out_of: Any = None) -> int | None:
    """An allowed integer score; a ``N/M`` whose M is not the scale's maximum is no score (4/5 on 0-4)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        match = _LONE.match(value)
        if not match:
            return None
        value, out_of = match.group(1), match.group(2) or out_of
    if out_of is not None and int(out_of) != max(allowed):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if not number.is_integer() or int(number) not in allowed:
        return None
    return int(number)


def _yes_no(word: str) -> int | None:
    w = " ".join(word.lower().split())
    return 1 if w in YES else 0 if w in NO else None


def _agreed(values: Sequence[T | None], how: str, text: str = "") -> Parsed[T]:
    """One value when every finding agrees; failed (ambiguous) when they differ or there is none."""
    if not values or values[0] is None or any(v is None for v in values) or len(set(values)) != 1:
        return _failed()
    return Parsed(values[0], how, text)


def parse_score(text: str, allowed: Collection[int], name: str = "score") -> Parsed[int]:
    """A score in ``allowed`` (see the module docstring for the order of the readers)."""
    if not allowed:
        return _failed()
    fields = _json_fields(text, name)
    if fields:  # the model wrote the field: its value decides, never a number elsewhere in the text
        scores = [_score(v, allowed) for v, _ in fields]
        reasoning = next((str(r) for _, d in fields if (r := _field(d, "reasoning")[1]) is not None), "")
        return _agreed(scores, "json", reasoning)
    labelled = [_score(m.group(1), allowed, m.group(2)) for r in (_LABELLED, _NAMED) for m in r.finditer(text)]
    if labelled:
        return _agreed(labelled, "labelled", text.strip())
    two = sorted(allowed)
    words = [_yes_no(m.group(1)) for m in _LABELLED_WORD.finditer(text)]
    if words and len(two) == 2:  # "Verdict: yes" on a two-valued scale (LoCoMo's 0 or 4)
        found = _agreed(words, "labelled", text.strip())
        return Parsed(two[found.value], "labelled", text.strip()) if found.value is not None else _failed()
    lines = [line for line in text.strip().splitlines() if line.strip()]
    first, rest = (lines[0], "\n".join(lines[1:])) if lines else ("", "")  # the whole reply, or its first line
    match = _LONE.match(first)
    if match:
        score = _score(match.group(1), allowed, match.group(2))
        return Parsed(score, "bare", rest) if score is not None else _failed()
    word = _LONE_WORD.match(first)
    if word and len(two) == 2 and (yes := _yes_no(word.group(1))) is not None:
        return Parsed(two[yes], "bare", rest)
    return _failed()


def _claim_text(item: Any) -> str | None:
    if isinstance(item, str):
        return item
    for key in ("claim", "statement", "text"):
        found, value = _field(item, key)
        if found and isinstance(value, str):
            return value
    return None


def parse_claims(text: str, name: str = "claims") -> Parsed[list[str]]:
    """A list of claims: ``{"claims": [...]}`` (also a bare JSON list, or items that are objects with a
    ``claim`` / ``statement``), else a bulleted or numbered list; blank entries dropped, an empty list
    valid. A truncated JSON list (no closing bracket) is no value: some claims would be silently lost."""
    candidates = [v for v, _ in _json_fields(text, name)]
    if not candidates:
        candidates = [v for v in json_values(text) if isinstance(v, list)]
    if candidates:
        lists = []
        for value in candidates:
            items = [_claim_text(v) for v in value] if isinstance(value, list) else [None]
            texts = [i.strip() for i in items if i is not None]
            if len(texts) != len(items):
                return _failed()
            lists.append(tuple(t for t in texts if t))
        found = _agreed(lists, "json")
        return Parsed(list(found.value), "json") if found.value is not None else _failed()
    if re.search(r"[{\[]", text) and re.search(rf"[\"']?{re.escape(name)}[\"']?\s*:", text, re.IGNORECASE):
        return _failed()  # a JSON answer cut short: never read as prose
    bullets = [str(m.group(2)).strip().strip("\"'").strip() for line in text.splitlines() if (m := _ITEM.match(line))]
    return Parsed([b for b in bullets if b], "labelled") if bullets else _failed()


def _verdict(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and float(value) in (0.0, 1.0):
        return int(value)
    if isinstance(value, str):
        word = value.strip().strip(".!").strip()
        return int(word) if word in ("0", "1") else _yes_no(word)
    found, inner = _field(value, "verdict")
    return _verdict(inner) if found and not isinstance(inner, dict) else None


def _line_verdict(rest: str) -> int | None:
    found = {(1 if m.group(2) == "1" else 0) if m.group(2) else _yes_no(m.group(1))
             for m in _VERDICT_WORD.finditer(rest)}
    return found.pop() if len(found) == 1 else None  # both words on one line: ambiguous


def parse_verdicts(text: str, n: int, name: str = "verdicts") -> Parsed[list[int]]:
    """Exactly ``n`` verdicts of 0 / 1 (one per claim, in order): ``{"verdicts": [1, 0]}`` (also yes/no,
    true/false, objects with a ``verdict``, a bare JSON list), else numbered lines (``1. yes``, ``Claim 2:
    not supported``) naming each claim once, else for one claim a ``Verdict: yes`` or a lone yes/no/0/1."""
    candidates = [v for v, _ in _json_fields(text, name)]
    if not candidates:
        candidates = [v for v in json_values(text) if isinstance(v, list)]
    if candidates:
        lists = []
        for value in candidates:
            if not isinstance(value, list) or len(value) != n:
                return _failed()
            verdicts = [_verdict(v) for v in value]
            if any(v is None for v in verdicts):
                return _failed()
            lists.append(tuple(v for v in verdicts if v is not None))
        found = _agreed(lists, "json")
        return Parsed(list(found.value), "json") if found.value is not None else _failed()
    numbered: dict[int, int | None] = {}
    for line in text.splitlines():
        match = _NUMBERED.match(line)
        if match:
            index = int(match.group(1))
            verdict = _line_verdict(match.group(2))
            numbered[index] = None if index in numbered else verdict  # named twice: ambiguous
    if numbered:
        if sorted(numbered) != list(range(1, n + 1)) or any(v is None for v in numbered.values()):
            return _failed()
        return Parsed([v for _, v in sorted(numbered.items()) if v is not None], "labelled")
    if n == 1:
        words = [_yes_no(m.group(1)) for m in _LABELLED_WORD.finditer(text)]
        if words:
            found_word = _agreed(words, "labelled")
            return Parsed([found_word.value], "labelled") if found_word.value is not None else _failed()
        lines = [line for line in text.strip().splitlines() if line.strip()]
        first = lines[0] if lines else ""
        lone = _LONE_WORD.match(first) or re.match(r"^\W*([01])\W*$", first)
        if lone:
            value = _verdict(lone.group(1))
            return Parsed([value], "bare") if value is not None else _failed()
    return _failed()


# ----------------------------------------------------------------------------- parsers for ``asking.ask``
def score_parser(allowed: Collection[int], name: str = "score") -> Callable[[str], int | None]:
    """``parse_score``'s value (None: a failed judgment), the shape ``ragbench.judge.asking.ask`` calls."""
    return lambda text: parse_score(text, allowed, name).value


def claims_parser(name: str = "claims") -> Callable[[str], list[str] | None]:
    return lambda text: parse_claims(text, name).value


def verdicts_parser(n: int, name: str = "verdicts") -> Callable[[str], list[int] | None]:
    return lambda text: parse_verdicts(text, n, name).value


# ----------------------------------------------------------------------------- schemas
def score_schema(allowed: Collection[int], name: str = "score") -> dict[str, Any]:
    """The JSON schema of a graded verdict: ``{"<name>": <an allowed integer>, "reasoning": "..."}``. The score
    comes first, so a reply cut at ``max_tokens`` still holds it."""
    return {"type": "object", "properties": {name: {"type": "integer", "enum": sorted(set(allowed))},
                                             "reasoning": {"type": "string"}},
            "required": [name, "reasoning"], "additionalProperties": False}


def claims_schema(name: str = "claims") -> dict[str, Any]:
    """The JSON schema of a claim list: ``{"<name>": ["...", ...]}``."""
    return {"type": "object", "properties": {name: {"type": "array", "items": {"type": "string"}}},
            "required": [name], "additionalProperties": False}


def verdicts_schema(n: int, name: str = "verdicts") -> dict[str, Any]:
    """The JSON schema of ``n`` per-claim verdicts: ``{"<name>": [0 or 1, ... n times], "reasoning": "..."}``."""
    return {"type": "object", "properties": {
        name: {"type": "array", "items": {"type": "integer", "enum": [0, 1]}, "minItems": n, "maxItems": n},
        "reasoning": {"type": "string"}}, "required": [name, "reasoning"], "additionalProperties": False}
