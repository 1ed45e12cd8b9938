"""The linear-time sentence splitting gives exactly what the plain (quadratic) rules gave, and inputs
that made those rules quadratic or cubic are split correctly. Timing is measured in
benchmarks/bench_chunking.py, not here."""

from __future__ import annotations

import random
import re

import pytest

from ragbench.datasets.custom import _md_title
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.ingest.sentences import _LATIN_END, _is_abbreviation, split_long, split_sentences
from ragbench.types import Document

PLAIN_END = re.compile(r"[.!?]+[\"'”’)\]]*\s+")  # the pattern the possessive one replaces
PLAIN_WORD = re.compile(r"(\S+)$")
PLAIN_TITLE = re.compile(r"^#\s+(.+?)\s*#*\s*$", flags=re.MULTILINE)
ALPHABET = list("ab Z.!?\"')]\t\n 。？”1#") + ["Dr", "U.S", "e.g", "  ", "\u3000", "\xa0", "J", "...", "# "]


def plain_split_long(text: str, max_chars: int) -> list[str]:
    """The former implementation (copies the remainder at every cut)."""
    if len(text) <= max_chars:
        return [text]
    pieces, rest = [], text
    while len(rest) > max_chars:
        cut = rest.rfind(" ", 0, max_chars + 1)
        if cut <= max_chars // 2:
            cut = max_chars
        pieces.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    if rest:
        pieces.append(rest)
    return [p for p in pieces if p]


def plain_is_abbreviation(before: str) -> bool:
    m = PLAIN_WORD.search(before)
    return bool(m) and _is_abbreviation(m.group(1))


def random_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 120))) for _ in range(n)]


@pytest.mark.parametrize("seed", range(3))
def test_same_results_as_the_plain_rules(seed):
    rng = random.Random(seed)
    for text in random_texts(3000, seed):
        assert [m.span() for m in _LATIN_END.finditer(text)] == [m.span() for m in PLAIN_END.finditer(text)]
        width = rng.randint(2, 40)
        assert split_long(text, width) == plain_split_long(text, width), (text, width)
        assert _is_abbreviation(text[-64:]) == plain_is_abbreviation(text[-64:]), text
        title = PLAIN_TITLE.search(text)
        assert _md_title(text) == (title.group(1) if title else None), text


def test_a_run_of_periods_is_one_failed_attempt_not_a_quadratic_scan():
    text = "." * 200_000 + " End"
    assert split_sentences(text) == ["." * 200_000, "End"]


def test_long_unpunctuated_line_is_cut_into_bounded_pieces():
    text = "lorem ipsum " * 50_000
    pieces = split_long(text, 600)
    assert all(len(p) <= 600 for p in pieces) and " ".join(pieces).split() == text.split()


def test_many_short_fragments_glue_in_one_pass():
    chunker = HierarchicalChunker(min_sentence_chars=20, max_paragraph_chars=10**9, max_sentence_chars=10**8)
    tree = chunker.chunk([Document(doc_id="d", title="T", text="Hi! " * 50_000)])
    sentences = [c.text for c in tree.chunks.values() if c.chunk_id.count(".") == 2]
    assert sentences == [" ".join(["Hi!"] * 50_000)]


def test_markdown_title_after_a_long_run_of_spaces():
    assert _md_title("# a" + " " * 100_000 + "b\n\ntext") == "a" + " " * 100_000 + "b"
    assert _md_title("# Title ##\nbody") == "Title"
    assert _md_title("intro\n#   \n") == PLAIN_TITLE.search("intro\n#   \n").group(1) == " "  # kept as it was
