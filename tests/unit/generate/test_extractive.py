"""The offline extractive baseline: deterministic span choice, citation, and "Not mentioned"."""

from ragbench.generate.extractive import NOT_MENTIONED, ExtractiveAnswerer
from ragbench.types import Context, Level, Query


def ctx(text):
    return Context(chunk_id="c", text=text, title="t", level=Level.PARAGRAPH, hit_ids=("c",))


def test_picks_the_best_supporting_sentence_and_cites_it():
    q = Query(qid="q", text="Where was the conference held?", answers=("Lisbon",), question_type="t")
    contexts = [ctx("Bob likes tea."), ctx("Alice: The conference was held in Lisbon. It rained.")]
    a = ExtractiveAnswerer().answer(q, contexts)
    # the sentence minus the question's content words ("conference", "held"), speaker tag dropped
    assert a.text == "The was in Lisbon."
    assert a.citations == (2,)
    assert a.model.startswith("extractive-baseline")


def test_says_not_mentioned_without_support():
    q = Query(qid="q", text="What is the capital of Peru?", answers=("Lima",), question_type="t")
    a = ExtractiveAnswerer().answer(q, [ctx("Bob likes tea.")])
    assert a.text == NOT_MENTIONED and a.citations == ()
    assert ExtractiveAnswerer().answer(q, []).text == NOT_MENTIONED


def test_is_deterministic():
    q = Query(qid="q", text="Which pet did Alice adopt?", answers=("a cat",), question_type="t")
    contexts = [ctx("Alice adopted a cat named Tom. Alice adopted nothing else.")]
    texts = {ExtractiveAnswerer().answer(q, contexts).text for _ in range(5)}
    assert len(texts) == 1
