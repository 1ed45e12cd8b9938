"""dataset=mtrag (ragbench.datasets.mtrag): the bundled sample in MTRAG's released layout, its turns and
history, bad input, and ragbench's document metrics against MTRAG's own evaluation script (vendored verbatim
in tests/fixtures/mtrag/official) on the sample, to 1e-9."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest

from ragbench.datasets.base import bundled_sample
from ragbench.datasets.mtrag import MTRAGAdapter, split_task, user_messages
from ragbench.errors import ConfigError, DatasetError
from ragbench.judge.document import document_ranking, document_scores
from ragbench.query.contextualize import ContextualizeRules
from ragbench.retrieval.bm25 import BM25Retriever

OFFICIAL = Path(__file__).resolve().parents[2] / "fixtures" / "mtrag" / "official"
KS = [1, 3, 5]


@pytest.fixture(scope="module")
def sample():
    return MTRAGAdapter(name="mtrag").load()


def test_the_sample_reads_as_conversation_turns(sample):
    assert len(sample.documents) == 329 and len(sample.queries) == 15
    by_id = {q.qid: q for q in sample.queries}
    turn = by_id["dd6b6ffd177f2b311abe676261279d2f#4"]
    assert (turn.conversation, turn.turn, turn.text) == ("dd6b6ffd177f2b311abe676261279d2f", 4,
                                                         "How many teams are in the NFL?")
    assert turn.meta["task_id"] == "dd6b6ffd177f2b311abe676261279d2f<::>4"
    assert turn.meta["followup"] == "follow-up" and turn.question_type == "Factoid"
    assert [t.text for t in turn.history][0] == "where do the arizona cardinals play this week"
    assert turn.history[0].answer.startswith("I'm sorry") and len(turn.history) == 3
    assert turn.meta["rewrite"] == "What is the number of teams in the NFL?"
    assert all(q.evidence and q.answers == () for q in sample.queries)
    assert sum(q.turn == 1 for q in sample.queries) == 2


def test_task_ids_and_user_messages():
    assert split_task("abc<::>12") == ("abc", 12) and split_task("abc::3") == ("abc", 3)
    assert split_task("abc") is None
    assert user_messages('|user|: "a?\n|user|: b?') == ['"a?', "b?"]


def test_answers_keep_the_generation_tasks_turns():
    turns = MTRAGAdapter(name="mtrag", answers=True).load().queries
    assert [q.turn for q in turns] == [2, 3, 4, 5, 6, 7, 8] and all(q.answers for q in turns)


def test_bad_input_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="dataset.domain='web'"):
        MTRAGAdapter(name="mtrag", domain="web")
    shutil.copytree(bundled_sample("mtrag"), tmp_path / "m")
    corpus = tmp_path / "m" / "corpora" / "passage_level" / "clapnq.jsonl"
    corpus.rename(corpus.with_suffix(".jsonl.zip"))
    with pytest.raises(DatasetError, match="unzip .*clapnq.jsonl.zip in place"):
        MTRAGAdapter(name="mtrag", path=str(tmp_path / "m")).load()


def _official():
    sys.path.insert(0, str(OFFICIAL))
    try:
        return importlib.import_module("run_retrieval_eval")
    finally:
        sys.path.remove(str(OFFICIAL))


@pytest.mark.parametrize("contextualize", [False, True])
def test_document_metrics_equal_mtrags_evaluation_script(sample, contextualize):
    official = _official()
    retriever = BM25Retriever()
    docs = sample.documents
    retriever.build(ids=[d.doc_id for d in docs], texts=[d.sections[0].paragraphs[0].text for d in docs])
    transform = ContextualizeRules(history_turns=2)
    texts = [transform.variants(q)[0] if contextualize else q.text for q in sample.queries]
    hits = retriever.search(texts=texts, k=10)
    qrels = official.load_qrels(str(bundled_sample("mtrag") / "mtrag-human/retrieval_tasks/clapnq/qrels/dev.tsv"))
    results, ours = {}, {}
    for q, found in zip(sample.queries, hits, strict=True):
        ranking = document_ranking([h.chunk_id for h in found])
        task = q.meta["task_id"]
        results[task] = {d: float(len(ranking) - i) for i, d in enumerate(ranking)}  # best first, no ties
        ours[task] = document_scores(ranking, {e.doc_id: e.relevance for e in q.evidence}, KS)
    per_task, ndcg, _, recall, _ = official.evaluate(qrels, results, KS)
    assert set(per_task) == set(ours)
    for task, theirs in per_task.items():
        for k in KS:
            assert ours[task][f"retrieval/doc/recall_at_{k}"] == pytest.approx(theirs[f"recall_{k}"], abs=1e-9)
            assert ours[task][f"retrieval/doc/ndcg_at_{k}"] == pytest.approx(theirs[f"ndcg_cut_{k}"], abs=1e-9)
    for k in KS:  # the script's means, rounded to 5 decimals
        mean = sum(o[f"retrieval/doc/ndcg_at_{k}"] for o in ours.values()) / len(ours)
        assert round(mean, 5) == ndcg[f"NDCG@{k}"]
        mean = sum(o[f"retrieval/doc/recall_at_{k}"] for o in ours.values()) / len(ours)
        assert round(mean, 5) == recall[f"Recall@{k}"]
