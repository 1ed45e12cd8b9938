"""dataset=mlflow's mapping both ways, without a store: a job's case rows as MLflow evaluation-dataset records
(``case_records``, what ``export --mlflow-dataset`` writes) and a record as ragbench's QA line (``_row``)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from ragbench.datasets.mlflow_dataset import MlflowDatasetAdapter, _order, case_records
from ragbench.errors import DatasetError


def _row(**over):
    row = {"qid": "q1", "question": "How much?", "question_type": "factual", "answerable": True,
           "answers": ["4.20 euros"], "doc_ids": ["ferry.md"],
           "evidence": {"texts": ["costs 4.20 euros", "for adults"], "how": ["exact", "soft"]},
           "qrels": {"unit": {"ev0": 2}, "chunk": {}}}
    return {**row, **over}


def test_a_case_row_becomes_a_record_with_mlflow_s_keys():
    (rec,) = case_records([_row()])
    assert rec == {"inputs": {"question": "How much?"},
                   "expectations": {"expected_response": "4.20 euros", "expected_retrieved_context": [
                       {"content": "costs 4.20 euros", "doc_uri": "ferry.md", "relevance": 2},
                       {"content": "for adults", "doc_uri": "ferry.md"}]},
                   "tags": {"ragbench.qid": "q1", "question_type": "factual", "ragbench.position": "0",
                            "ragbench.doc_ids": '["ferry.md"]'}}


def test_documents_judged_whole_and_several_answers_and_no_answer():
    whole, doc_level, bare = case_records([
        _row(evidence={"texts": ["the whole text"], "how": ["id"]}, answers=["a", "b"], answerable=False),
        _row(doc_qrels={"a.md": 1, "b.md": 3}, doc_ids=["a.md", "b.md"]),
        _row(answers=[], doc_ids=["x.md", "y.md"], evidence={"texts": ["q"], "how": ["exact"]})])
    assert whole["expectations"] == {"expected_response": ["a", "b"],
                                     "expected_retrieved_context": [{"doc_uri": "ferry.md", "relevance": 2}]}
    assert whole["tags"]["answerable"] == "false"
    assert doc_level["expectations"]["expected_retrieved_context"] == [{"doc_uri": "a.md"},
                                                                       {"doc_uri": "b.md", "relevance": 3}]
    assert bare["expectations"] == {"expected_retrieved_context": [{"content": "q", "relevance": 2}]}  # located


def _record(**over):
    base = {"dataset_record_id": "dr-1", "created_time": 5, "inputs": {"question": "How much?"},
            "expectations": {}, "tags": {}}
    return SimpleNamespace(**{**base, **over})


def test_a_record_is_read_as_a_qa_line_and_its_exported_form_round_trips():
    adapter = MlflowDatasetAdapter(name="faq", documents="/kb")
    (rec,) = case_records([_row()])
    line = adapter._row(_record(**rec), 1)
    assert line == {"id": "q1", "question": "How much?", "answers": "4.20 euros", "question_type": "factual",
                    "doc_ids": ["ferry.md"], "evidence": [
                        {"text": "costs 4.20 euros", "doc_id": "ferry.md", "relevance": 2},
                        {"text": "for adults", "doc_id": "ferry.md"}]}
    assert adapter.path == "/kb" and adapter.corpus_file is None
    jsonl = MlflowDatasetAdapter(name="faq", documents="/kb/corpus.jsonl")
    assert (jsonl.path, jsonl.corpus_file) == ("/kb", "corpus.jsonl")


def test_a_one_field_input_is_the_question_and_the_record_id_the_qid():
    adapter = MlflowDatasetAdapter(name="faq", documents="/kb")
    line = adapter._row(_record(inputs={"query": "Why?"}, tags={"answerable": "False", "question_type": "t"}), 1)
    assert line == {"id": "dr-1", "question": "Why?", "question_type": "t", "answerable": False}


@pytest.mark.parametrize(("record", "says"), [
    (_record(inputs={"a": "x", "b": "y"}), "inputs has no 'question' string (its keys: ['a', 'b'])"),
    (_record(expectations={"expected_retrieved_context": "text"}), "expected_retrieved_context is not a list"),
    (_record(expectations={"expected_retrieved_context": [{"score": 1}]}), "neither a string nor an object"),
    (_record(tags={"ragbench.doc_ids": "a.md"}), "tag ragbench.doc_ids is not a JSON list"),
])
def test_a_bad_record_is_one_line_naming_it(record, says):
    with pytest.raises(DatasetError) as err:
        MlflowDatasetAdapter(name="faq", documents="/kb")._row(record, 1)
    first, fix = str(err.value).split("\n")
    assert says in first and "record dr-1" in first and "MLflow dataset 'faq'" in first and fix.startswith("  fix: ")


def test_records_come_back_in_the_exported_order():
    records = [_record(dataset_record_id=i, tags={"ragbench.position": p}, created_time=t)
               for i, p, t in (("c", "10", 1), ("a", "2", 9), ("z", "", 0), ("b", "", 0))]
    assert [r.dataset_record_id for r in sorted(records, key=_order)] == ["a", "c", "b", "z"]


def test_no_corpus_and_no_name_are_one_line_each():
    with pytest.raises(DatasetError, match="field 'dataset.documents'"):
        MlflowDatasetAdapter(name="faq").root()
    with pytest.raises(DatasetError, match=r"no dataset named.*\n  fix: run with dataset=mlflow dataset.name=NAME"):
        MlflowDatasetAdapter(documents="/kb")._records()
    assert json.loads(case_records([_row(doc_ids=["a b.md"])])[0]["tags"]["ragbench.doc_ids"]) == ["a b.md"]


def test_the_process_tracking_uri_is_as_before_after_the_block(monkeypatch):
    """``tracking_uri`` (dataset=mlflow reads through MLflow's process-wide URI) leaves no URI set behind: it
    would outrank ``$MLFLOW_TRACKING_URI`` for the rest of the process; one set before is set again."""
    import mlflow

    from ragbench.datasets.mlflow_dataset import tracking_uri

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///a.db")
    with tracking_uri("sqlite:///b.db"):
        assert mlflow.get_tracking_uri() == "sqlite:///b.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///c.db")
    assert mlflow.get_tracking_uri() == "sqlite:///c.db"  # the variable rules again
    mlflow.set_tracking_uri("sqlite:///set.db")
    try:
        with tracking_uri("sqlite:///b.db"):
            pass
        assert mlflow.get_tracking_uri() == "sqlite:///set.db"
    finally:
        mlflow.set_tracking_uri(None)
