"""Citation support, worked by hand: cited sentences parsed from a reply, content-token coverage against the
cited contexts (>= 0.5 supported), answer/citation_missing on citation_required questions, answer/raw_*."""

from __future__ import annotations

from ragbench.generate.citations import cited_sentences
from ragbench.judge.citations import citation_scores, content_tokens, coverage, raw_scores, support_rate

CTX = ["Paris is the capital of France and its largest city.", "The Seine flows through Paris."]


def test_cited_sentences_own_their_markers():
    reply = "Paris is the capital. [ref_1] It has 2.1 million people [ref_2]. Nothing here! Also [ref_9] x [ref_1, ref_2]?"
    assert cited_sentences(reply, 2) == (("Paris is the capital.", (1,)), ("It has 2.1 million people.", (2,)),
                                         ("Also x?", (1, 2)))
    assert cited_sentences("Twelve words of ref one [ref_1]", 1) == (("Twelve words of ref one", (1,)),)
    assert cited_sentences("No citation.", 3) == ()


def test_content_tokens_and_coverage_by_hand():
    # normalised: "paris is capital of france" -> stopwords is/of out -> {paris, capital, france}
    assert content_tokens("Paris is the capital of France.") == {"paris", "capital", "france"}
    assert coverage("Paris is the capital of France.", [CTX[0]]) == 1.0
    # {paris, has, 9, million, people} minus "has" -> {paris, 9, million, people}: only paris in ctx 1 -> 1/4
    assert coverage("Paris has 9 million people.", [CTX[0]]) == 0.25
    assert coverage("It is.", CTX) is None  # no content tokens


def test_support_rate_threshold_half():
    cited = [("Paris is the capital of France.", (1,)),        # 3/3 supported
             ("Paris has 9 million people.", (1,)),            # 1/4 not supported
             ("The Seine flows through the capital.", (2,)),   # {seine, flows, through, capital}: 3/4 supported
             ("The Seine flows near Lyon.", (1,)),             # {seine, flows, near, lyon} vs ctx 1: 0/4
             ("It is.", (1,))]                                 # no content tokens: left out
    assert support_rate(cited, CTX) == 2 / 4
    assert coverage("The Seine flows through the capital.", [CTX[1]]) == 0.75
    # exactly half is supported: {paris, rome} against ctx 1 -> 1/2
    assert support_rate([("Paris and Rome.", (1,))], CTX) == 1.0
    assert support_rate([("Paris.", (7,))], CTX) is None  # cites no given context


def test_citation_scores_and_missing():
    assert citation_scores([("Paris is the capital of France.", (1,))], [1], CTX, {}) == {
        "answer/citation_support_rate": 1.0}
    assert citation_scores([], [], CTX, {"citation_required": True}) == {"answer/citation_missing": 1.0}
    assert citation_scores([], [2], CTX, {"citation_required": True}) == {"answer/citation_missing": 0.0}
    assert citation_scores([], [], CTX, {"citation_required": False}) == {}


def test_raw_scores_are_the_lexical_scores_of_the_unprocessed_answer():
    # normalised: "12345 million" vs "12345": P 1/2, R 1 -> F1 2/3; the gold is a whole-token run inside
    raw = raw_scores("$1,234.5 million", ["1234.5"], dataset="custom", meta={})
    assert raw == {"answer/raw_em": 0.0, "answer/raw_f1": 2 / 3, "answer/raw_contains": 1.0}
    assert raw_scores("1234.5", ["1234.5"], dataset="custom", meta={})["answer/raw_em"] == 1.0
