"""JSON read with a bound on nesting. ``json.loads`` recurses once per bracket, so a line of 100,000
nested brackets is a ``RecursionError`` (a traceback, or a misleading message where it is caught as
anything). ``loads_bounded`` counts the nesting first and refuses deeper text with ``NestedTooDeep``.

The pre-scan is cheap (no Python loop over characters): text with no more opening brackets than the
bound cannot be too deep; otherwise the strings are cut out (a bracket inside a string does not nest) and
the innermost bracket pairs removed a level at a time, at most ``max_depth`` passes over what is left.
Only text that still holds a bracket after that is walked to name the column. ``NestedTooDeep`` is a
``json.JSONDecodeError``, so a reader's "not JSON" handler catches it, and a ``RagbenchError``: its
message names ``where`` and the limit.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ragbench.errors import RagbenchError

# far deeper than any record ragbench reads or writes (a case line nests 4 levels), far below the
# interpreter's recursion limit (1,000 frames, part of them already used by the caller)
MAX_DEPTH = 100
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_PAIR = re.compile(r"[\[{][\]}]")  # an innermost pair, once strings and everything else are gone
# a string (its escapes skipped) or one bracket
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


class NestedTooDeep(json.JSONDecodeError, RagbenchError):
    """JSON nested deeper than the reader's bound: ``msg`` says so (``nested too deep``), ``str()`` also
    names where."""

    def __init__(self, where: str, max_depth: int, doc: str, pos: int) -> None:
        super().__init__(f"nested too deep (more than {max_depth} levels of brackets)", doc, pos)
        self.where = where
        self.max_depth = max_depth
        self.args = (f"{where + ': ' if where else ''}{self.msg} at column {self.colno}; fix: write the "
                     f"value with at most {max_depth} nested arrays and objects",)

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[Any, ...]:  # pickled across processes like any exception
        return (type(self), (self.where, self.max_depth, self.doc, self.pos))


def nesting_problem(text: str | bytes, max_depth: int = MAX_DEPTH) -> int | None:
    """The offset of the first bracket that opens level ``max_depth + 1`` (outside strings), else None."""
    if isinstance(text, bytes):  # brackets, quotes, backslashes are ASCII: latin-1 keeps UTF-8's offsets
        if text.count(b"[") + text.count(b"{") <= max_depth:
            return None
        text = text.decode("latin-1")
    elif text.count("[") + text.count("{") <= max_depth:
        return None
    # C-speed passes: escaped quotes and backslashes out, then the strings (every second piece between
    # quotes), then everything but brackets, then the innermost bracket pairs, one level a pass
    bare = text.replace("\\\\", "").replace('\\"', "") if "\\" in text else text
    brackets = _NOT_BRACKET.sub("", "".join(bare.split('"')[::2]))
    for _ in range(max_depth):
        brackets, n = _PAIR.subn("", brackets)
        if not n:
            break
    if "[" not in brackets and "{" not in brackets:
        return None
    depth = 0  # maybe too deep (or not JSON): where, stopping at the first bracket past the bound
    for m in _TOKENS.finditer(text):
        token = m.group()
        if token in "[{":
            depth += 1
            if depth > max_depth:
                return m.start()
        elif token in "]}":
            depth = max(0, depth - 1)
    return None


def loads_bounded(text: str | bytes, *, max_depth: int = MAX_DEPTH, where: str = "") -> Any:
    """``json.loads(text)``, or ``NestedTooDeep`` (naming ``where``) when brackets nest deeper than
    ``max_depth``; any other fault is ``json.loads``' own (``JSONDecodeError``, ``UnicodeDecodeError``)."""
    at = nesting_problem(text, max_depth)
    if at is not None:
        doc = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        raise NestedTooDeep(where, max_depth, doc, at)
    return json.loads(text)
