"""Dataset summary (hand-worked example) and the ``stats`` CLI on the bundled samples."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from ragbench.datasets.__main__ import load_config, main
from ragbench.datasets.stats import counts, qa_by_type, summarize
from ragbench.text import loose_normalize as normalize
from ragbench.types import Document, EvalSet, Evidence, Paragraph, Query, Section

DOCS = (
    Document(doc_id="a", title="A", sections=(Section(title="S1", ref="s1", paragraphs=(
        Paragraph(text="Alpha beta, gamma.", ref="p1"), Paragraph(text="Delta epsilon.", ref="p2"))),)),
    Document(doc_id="b", title="B", text="The QUICK brown fox; jumps."),
)
QUERIES = (
    Query(qid="1", text="?", answers=("x",), question_type="t1",
          evidence=(Evidence(ref="p1", doc_id="a"), Evidence(ref="p9", doc_id="a")), doc_ids=("a",)),
    Query(qid="2", text="?", answers=("x",), question_type="t1",
          evidence=(Evidence(text="quick brown FOX jumps"), Evidence(text="alpha beta", doc_id="b")), doc_ids=("b",)),
    Query(qid="3", text="?", answers=("n",), question_type="t2", answerable=False),
)


def test_normalize():
    assert normalize("  The QUICK, brown\nfox!  ") == "the quick brown fox"


def test_summary_worked_example():
    es = EvalSet(name="toy", documents=DOCS, queries=QUERIES, fingerprint="f" * 64, variant="sample",
                 stats={"skipped": 1}, tags={"k": "v"})
    s = summarize(es)
    assert (s.documents, s.sections, s.paragraphs) == (2, 1, 2)
    assert s.characters == len("Alpha beta, gamma.") + len("Delta epsilon.") + len("The QUICK brown fox; jumps.")
    t1 = s.by_type["t1"]
    # q1: p1 exists in a (found), p9 does not; q2: the quote is in b (its doc_ids), "alpha beta" is not in b
    assert (t1.queries, t1.answerable, t1.with_evidence, t1.evidence, t1.evidence_found) == (2, 2, 2, 4, 2)
    t2 = s.by_type["t2"]
    assert (t2.queries, t2.answerable, t2.with_evidence, t2.evidence) == (1, 0, 0, 0)
    assert s.queries == 3 and s.total.evidence_found == 2
    assert (s.evidence_ref, s.evidence_text) == (2, 2)
    assert qa_by_type(QUERIES) == {"t1": 2, "t2": 1}
    assert counts(es) == {"documents": 2, "queries": 3, "queries_unanswerable": 1, "queries/t1": 2, "queries/t2": 1,
                          "stats/skipped": 1}


@pytest.mark.parametrize("name", ["locomo", "qasper", "syllabusqa", "financebench", "multihop_rag"])
def test_every_config_instantiates_its_sample(name):
    es = instantiate(load_config(name, [])).load()
    assert es.name == name and es.documents and es.queries


def test_custom_config_needs_a_path(capsys):
    assert main(["stats", "custom"]) == 1
    assert "needs dataset.path" in capsys.readouterr().err


def test_stats_cli_prints_types_and_counters(capsys):
    assert main(["stats", "syllabusqa", "split=all"]) == 0
    out = capsys.readouterr().out
    for needle in ("syllabusqa (sample)", "single_factual", "no_answer", "279", "evidence_reasoning_steps"):
        assert needle in out


def test_stats_cli_errors(capsys):
    assert main(["stats", "nope"]) == 1
    assert "unknown dataset 'nope'" in capsys.readouterr().err
    assert main(["stats", "qasper", "split"]) == 1
    assert "key=value" in capsys.readouterr().err
    assert main(["stats", "qasper", "split=dev"]) == 1
    assert "file not found" in capsys.readouterr().err


def test_list_cli(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("RAGBENCH_CACHE", str(tmp_path))
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "multihop_rag" in out and "not downloaded" in out and "custom" in out
