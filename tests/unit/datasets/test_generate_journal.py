"""Generation files: the resume journal, the written set (read back by dataset=custom), the split, dedup
and `inspect`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragbench.datasets.custom import CustomAdapter
from ragbench.datasets.evalgen.dedup import Deduplicator
from ragbench.datasets.evalgen.journal import Journal, Outcome, journal_path, split_samples, write_set
from ragbench.datasets.inspect_set import inspect_samples
from ragbench.errors import ConfigError
from ragbench.ingest.hierarchical import HierarchicalChunker
from ragbench.types import Document

DOC = "# Ferry\n\n## Times\n\nThe ferry leaves the north pier at 7:15 every weekday.\n\n## Fares\n\nA day pass costs 6 euros.\n"


def sample(i: int, qtype: str = "factual", quote: str | None = "The ferry leaves the north pier at 7:15") -> dict:
    answerable = qtype != "unanswerable"
    return {"id": f"gen_{i:05d}", "question": f"When does ferry {i} leave the pier?",
            "reference_answer": "7:15" if answerable else None,
            "evidence": [{"document_id": "ferry.md", "node_id": "ferry.md#s1.p0.t0", "quote": quote,
                          "relevance": 3}] if answerable else [],
            "difficulty": "easy", "question_type": qtype, "answerable": answerable}


def test_journal_resumes_and_tolerates_a_cut_line(tmp_path):
    out = tmp_path / "eval.json"
    j = Journal(out, {"seed": 1})
    j.record(Outcome(slot=0, question_type="factual", status="kept", item=sample(0), cost_usd=0.5))
    j.record(Outcome(slot=1, question_type="factual", status="dropped", reason="quote_not_found"))
    with journal_path(out).open("a") as fh:
        fh.write('{"slot": 2, "status": "ke')  # a kill in the middle of a write
    again = Journal(out, {"seed": 1})
    assert sorted(again.done) == [0, 1] and again.done[1].reason == "quote_not_found"
    assert [o.item["id"] for o in again.kept()] == ["gen_00000"]
    again.finish()
    assert not journal_path(out).exists()


def test_journal_of_another_configuration_is_refused_unless_forced(tmp_path):
    out = tmp_path / "eval.json"
    Journal(out, {"seed": 1, "n": 5}).record(Outcome(slot=0, question_type="factual", status="dropped"))
    with pytest.raises(ConfigError, match=r"(?s)differs in: seed\).*force=true"):
        Journal(out, {"seed": 2, "n": 5})
    assert Journal(out, {"seed": 2, "n": 5}, force=True).done == {}


def test_written_set_loads_with_dataset_custom(tmp_path):
    (tmp_path / "ferry.md").write_text(DOC, encoding="utf-8")
    samples = [sample(0), sample(1, "unanswerable"), sample(2)]
    write_set(tmp_path / "eval.json", samples, {"provenance": {"seed": 1}}, test_share=None, seed=1)
    es = CustomAdapter(name="custom", path=str(tmp_path), qa_file="eval.json").load()
    assert [q.qid for q in es.queries] == ["gen_00000", "gen_00001", "gen_00002"]
    q0, q1 = es.queries[:2]
    assert q0.evidence[0].doc_id == "ferry.md" and q0.evidence[0].relevance == 3 and q0.answers == ("7:15",)
    assert not q1.answerable and q1.question_type == "unanswerable"


def test_split_is_seeded_disjoint_and_per_type(tmp_path):
    samples = [sample(i, "factual") for i in range(6)] + [sample(i, "unanswerable") for i in range(6, 10)]
    train, test = split_samples(samples, test_share=0.5, seed=7)
    assert (train, test) == split_samples(samples, test_share=0.5, seed=7)
    assert {s["id"] for s in train}.isdisjoint(s["id"] for s in test) and len(train) + len(test) == 10
    assert sum(s["question_type"] == "unanswerable" for s in test) == 2  # half of each type
    files = write_set(tmp_path / "eval.json", samples, {}, test_share=0.5, seed=7)
    assert [f.name for f in files] == ["eval.json", "eval.train.json", "eval.test.json"]
    meta = json.loads(files[2].read_text())["metadata"]["split"]
    assert meta == {"part": "test", "test_share": 0.5, "seed": 7, "of": "eval.json"}


@pytest.mark.parametrize("share", [0, 1, 1.5, -0.2])
def test_a_bad_split_is_a_named_error(share):
    with pytest.raises(ConfigError, match="(?s)split=.*held out.*fix: give a number between 0 and 1"):
        split_samples([sample(0)], test_share=share, seed=1)


def test_dedup_lexical_and_by_vectors():
    lex = Deduplicator(method="lexical", threshold=0.8)
    lex.add("When does the ferry leave the north pier?", "a")
    assert lex.near("When does the ferry leave the north pier?")[0] == "a"
    assert lex.near("How much does a day pass cost?") is None

    def embed(texts):  # a real (if crude) embedding: letter counts
        return np.array([[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts], dtype=float)

    vec = Deduplicator(method="embedder", threshold=0.99, embed=embed)
    vec.add("When does the ferry leave?", "a")
    assert vec.near("when does the ferry leave") == ("a", pytest.approx(1.0))
    assert vec.near("How much is a day pass for children?") is None
    with pytest.raises(ConfigError, match="dedup.method"):
        Deduplicator(method="fuzzy", threshold=0.9)


def test_inspect_names_bad_items():
    tree = HierarchicalChunker().chunk([Document(doc_id="ferry.md", title="Ferry", text=DOC)])
    bad_quote = sample(1, quote="The ferry sails to the moon on Sundays")
    no_evidence = {**sample(2), "evidence": []}
    dup = {**sample(3), "question": sample(0)["question"]}
    broken = {"id": "x", "question": "Is this broken?"}  # no 'answerable'
    report = inspect_samples([sample(0), bad_quote, no_evidence, dup, broken, sample(5, "unanswerable")], tree)
    reasons = dict(report.bad)
    assert "quote not found" in reasons["gen_00001"]
    assert reasons["gen_00002"] == "answerable but has no evidence"
    assert reasons["gen_00003"] == "same question as gen_00000"
    assert "answerable" in reasons["x"] and "missing" in reasons["x"]
    assert report.by_type == {"factual": 4, "unanswerable": 1} and report.answerable == 4
    assert report.evidence_how == {"exact": 2, "unmatched": 1} and report.match_rate == pytest.approx(2 / 3)
