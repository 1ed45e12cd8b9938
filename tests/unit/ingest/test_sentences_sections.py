"""Sentence splitting and raw-text section detection."""

from ragbench.ingest.sections import heading_of, split_sections
from ragbench.ingest.sentences import pack, split_long, split_sentences


def test_abbreviations_decimals_and_initials_stay_whole():
    text = "Dr. Smith paid $3.50 for it. Then he left! The U.S. team won, e.g. twice. J. Doe agreed."
    assert split_sentences(text) == [
        "Dr. Smith paid $3.50 for it.", "Then he left!", "The U.S. team won, e.g. twice.", "J. Doe agreed."
    ]


def test_cjk_punctuation_splits():
    assert split_sentences("我们很好。你呢？好的") == ["我们很好。", "你呢？", "好的"]


def test_lowercase_continuation_is_not_a_boundary():
    assert split_sentences("It cost approx. five dollars. ok then") == ["It cost approx. five dollars. ok then"]


def test_split_long_and_pack():
    pieces = split_long("word " * 50, 40)
    assert all(len(p) <= 40 for p in pieces) and " ".join(pieces).split() == ["word"] * 50
    assert pack(["aaaa", "bbbb", "cccc"], 9) == [["aaaa", "bbbb"], ["cccc"]]


def test_headings():
    assert heading_of("## Results") == (2, "Results")
    assert heading_of("1.2 Experimental Setup") == (2, "1.2 Experimental Setup")
    assert heading_of("第三章 方法") == (1, "第三章 方法")
    assert heading_of("第二节 数据") == (2, "第二节 数据")
    assert heading_of("3 apples were eaten.") is None
    assert heading_of("Plain sentence.") is None


def test_split_sections_keeps_heading_path():
    text = "# Intro\nhello there.\n\nmore text\n## Sub\nx y\n第一章 总则\n内容"
    secs = split_sections(text, default_title="doc")
    assert [s.title for s in secs] == ["Intro", "Intro > Sub", "第一章 总则"]
    assert [p.text for p in secs[0].paragraphs] == ["hello there.", "more text"]


def test_text_before_any_heading_gets_the_document_title():
    secs = split_sections("preamble line\n\n# H\nbody", default_title="My doc")
    assert [s.title for s in secs] == ["My doc", "H"]
