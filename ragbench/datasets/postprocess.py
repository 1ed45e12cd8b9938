"""Answer post-processing hooks of a dataset (``dataset.postprocess``, picked by Hydra ``_target_``;
``ragbench.protocols.AnswerPostprocessor``): applied to the generated answer before it is scored. The case
record keeps both answers; ``answer/raw_*`` are the lexical scores of the unprocessed one
(``ragbench.judge.citations.raw_scores``).

- ``NumberNormalizer``: every number written with a currency sign, thousands separators, trailing zeros
  or a scale word/percent sign becomes the bare number (``$1,234.50 million`` -> ``1234.5``): FinanceBench
  gold answers and a model's formatted figures then compare by value.
- ``MultipleChoice``: a question with ``options`` (custom format; SyllabusQA-style multiple choice) whose
  answer picks one by letter (``B``, ``(b)``, ``Answer: B.``) becomes that option's text (``to="text"``), or
  an answer naming exactly one option's text becomes its letter (``to="letter"``).
- ``Chain``: several of them in order.
"""

from __future__ import annotations

import re
import string
from typing import Any

from ragbench.errors import ConfigError
from ragbench.protocols import AnswerPostprocessor
from ragbench.types import Query

_NUMBER = re.compile(
    r"(?<![\w.])(?:[$€£¥]\s?)?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?"
    r"(?:\s?(?:million|billion|thousand|mn|bn|m|b|k)\b|\s?%)?", re.IGNORECASE)
_LETTER = re.compile(r"^\W*(?:(?:the\s+)?(?:correct\s+)?(?:answer|option)(?:\s+is)?\s*[:\-]?\s*)?\(?([A-Za-z])\)?"
                     r"(?:[.):]|\s*$|\s+[-:])", re.IGNORECASE)


def plain_number(whole: str, fraction: str | None) -> str:
    """``1,234`` + ``.50`` -> ``1234.5``: no separators, no trailing zeros after the point."""
    out = whole.replace(",", "")
    frac = (fraction or "").rstrip("0")
    return out + (frac if frac not in ("", ".") else "")


class _Hook:
    """Equal and shown by their settings (a hook is part of the dataset's state: ``BaseAdapter.load`` reuses a
    set by it). Not dataclasses: OmegaConf would turn a dataclass inside a ``steps`` list back into a config."""

    name = ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in sorted(vars(self).items()))})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash(repr(self))


class NumberNormalizer(_Hook):
    """Numbers to their bare value: currency signs, thousands separators, trailing zeros and one trailing
    scale word (million, billion, thousand, m, bn, k) or ``%`` are dropped; other text is kept."""

    name = "numbers"

    def process(self, text: str, query: Query) -> str:
        return _NUMBER.sub(lambda m: plain_number(m.group(1), m.group(2)), text)


class MultipleChoice(_Hook):
    """Option letters to option texts (``to="text"``) or back (``to="letter"``), from the question's
    ``options`` (A = the first). A question without options, or an answer that picks none, is unchanged."""

    name = "multiple_choice"

    def __init__(self, to: str = "text") -> None:
        if to not in ("text", "letter"):
            raise ConfigError(f"dataset.postprocess.to={to!r} is not valid; choose text or letter")
        self.to = to

    def process(self, text: str, query: Query) -> str:
        options = [str(o) for o in query.meta.get("options") or ()]
        if not options:
            return text
        letters = string.ascii_uppercase[: len(options)]
        if self.to == "text":
            m = _LETTER.match(text.strip())
            if m and m.group(1).upper() in letters:
                return options[letters.index(m.group(1).upper())]
            return text
        lowered = text.lower()
        named = [i for i, o in enumerate(options) if o.strip() and o.lower() in lowered]
        if len(named) == 1:
            return letters[named[0]]
        m = _LETTER.match(text.strip())
        return m.group(1).upper() if m and m.group(1).upper() in letters else text


class Chain(_Hook):
    """Several hooks in order (``steps``: a list of ``_target_`` nodes), e.g. options first, then numbers."""

    name = "chain"

    def __init__(self, steps: Any = ()) -> None:
        self.steps: tuple[AnswerPostprocessor, ...] = tuple(steps)
        bad = [type(s).__name__ for s in self.steps if not isinstance(s, AnswerPostprocessor)]
        if bad:
            raise ConfigError(f"dataset.postprocess.steps holds {bad[0]}, not an answer post-processor; fix: give "
                              "each step a _target_ such as ragbench.datasets.postprocess.NumberNormalizer")

    def process(self, text: str, query: Query) -> str:
        for step in self.steps:
            text = step.process(text, query)
        return text
