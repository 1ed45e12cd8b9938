"""[ref_N] citation parsing: numbers, grouping, range checks, and the cleaned answer text."""

from __future__ import annotations

import pytest

from ragbench.generate.citations import parse_citations


@pytest.mark.parametrize(
    "text,n,clean,cited",
    [
        ("Paris [ref_1]", 3, "Paris", (1,)),
        ("Paris [ref_1].", 3, "Paris.", (1,)),
        ("A [ref_2, ref_3][ref_1] and B [ref_2]", 3, "A and B", (2, 3, 1)),
        ("x [REF_2; 3]", 3, "x", (2, 3)),
        ("y [ref 2]", 3, "y", (2,)),
        ("z [ref_9] [ref_0]", 3, "z", ()),  # out of range: removed from text, not cited
        ("no citation here", 2, "no citation here", ()),
        ("Not mentioned", 0, "Not mentioned", ()),
        ("keep [1] and [note]", 3, "keep [1] and [note]", ()),  # only ref markers are citations
        ("spaced , text [ref_1]", 2, "spaced, text", (1,)),
    ],
)
def test_parse_citations(text, n, clean, cited):
    assert parse_citations(text, n) == (clean, cited)
