"""MLflow evaluation datasets in and out (issue 40, items 4): a real retrieval-only job on a custom set, its
questions exported as an MLflow dataset (``python -m ragbench.export RUN_ID --mlflow-dataset NAME``) and read
back with ``dataset=mlflow`` gives identical metrics; the dataset's id and digest are in the record; an unknown
name, a dataset without a corpus and a store that keeps no datasets are one line each."""

from __future__ import annotations

import http.server
import json
import shutil
import threading
from pathlib import Path

import pytest

from ragbench.errors import DatasetError
from ragbench.export import main as export
from tests.fixtures.jobs import compose_cfg, run_job

ROOT = Path(__file__).resolve().parents[2]
QA = [
    {"id": "fare", "question": "How much is an adult single ferry ticket?", "answers": ["4.20 euros"],
     "question_type": "factual", "evidence": [{"text": "A single ticket costs 4.20 euros for adults", "doc_id": "ferry.md"}]},
    {"id": "wind", "question": "When is the ferry service suspended?", "answers": ["wind above 60 km/h", "strong wind"],
     "question_type": "factual", "evidence": ["the wind at the harbour mouth exceeds 60 km/h"]},
    {"id": "fines", "question": "What is the late fee for a film?", "answers": ["0.25 euros a day"],
     "question_type": "multi_hop", "evidence": [{"text": "a late fee of 0.25 euros a day", "relevance": 2},
                                                "films for one week"]},
    {"id": "bake", "question": "How hot is the oven for the loaf?", "question_type": "temporal",
     "evidence": [{"text": "bake it at 230 °C for 40 minutes in a covered pot", "doc_id": "bread"}]},
    {"id": "ferry-cats", "question": "May cats travel on the ferry?", "answers": ["Not mentioned"],
     "answerable": False, "question_type": "unanswerable", "doc_ids": ["ferry.md"]},
]
JOB = ["stages=retrieval", "retrieval=bm25", "reranker=none"]
NAME = "faq-export"


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory):
    """One exported job and its read-back (shared by the module: two real jobs)."""
    tmp = tmp_path_factory.mktemp("mlflow-dataset")
    kb = tmp / "kb"
    shutil.copytree(ROOT / "examples" / "docs", kb)
    (tmp / "qa.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QA), encoding="utf-8")
    native, client = run_job(["dataset=custom", f"dataset.path={kb}", f"dataset.qa_file={tmp / 'qa.jsonl'}", *JOB],
                             tmp)
    uri = f"sqlite:///{tmp}/mlruns/mlflow.db"
    assert export([native.info.run_id, "--mlflow-dataset", NAME, "--tracking-uri", uri]) == 0
    back, _ = run_job(["dataset=mlflow", f"dataset.name={NAME}", f"dataset.documents={kb}", *JOB], tmp)
    return native, back, client, tmp, kb, uri


def _record(client, run) -> dict:
    path = client.download_artifacts(run.info.run_id, "run.json")
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _cases(client, run) -> list[dict]:
    path = client.download_artifacts(run.info.run_id, "cases.jsonl")
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def test_an_exported_dataset_read_back_gives_identical_metrics(round_trip):
    native, back, client, *_ = round_trip
    assert native.info.status == back.info.status == "FINISHED"
    scores = {k: v for k, v in native.data.metrics.items()
              if k.split("/")[0] in ("retrieval", "context", "headline", "by_type", "cases")}
    assert scores and "retrieval/hit_at_5" in scores
    assert {k: back.data.metrics.get(k) for k in scores} == scores
    mine, theirs = _cases(client, native), _cases(client, back)
    fields = ("qid", "question", "question_type", "answerable", "answers", "doc_ids", "qrels", "ranked_ids")
    assert [{f: c[f] for f in fields} for c in theirs] == [{f: c[f] for f in fields} for c in mine]


def test_the_record_holds_the_mlflow_dataset_id_and_digest(round_trip):
    native, back, client, _, _, uri = round_trip
    from mlflow.genai.datasets import get_dataset

    from ragbench.datasets.mlflow_dataset import tracking_uri

    record = _record(client, back)
    with tracking_uri(uri):
        stored = get_dataset(name=NAME)
        records = list(client.get_dataset(stored.dataset_id).records)
    assert record["dataset"] == NAME
    assert record["tags"]["ragbench.dataset.mlflow_id"] == stored.dataset_id
    assert record["tags"]["ragbench.dataset.mlflow_digest"] == stored.digest
    assert record["fingerprints"]["dataset_sha256"] != _record(client, native)["fingerprints"]["dataset_sha256"]
    rows = {r.tags["ragbench.qid"]: r for r in records}
    assert rows["fines"].expectations["expected_retrieved_context"][0] == {
        "content": "a late fee of 0.25 euros a day", "doc_uri": "library.md", "relevance": 2}
    assert rows["wind"].expectations["expected_response"] == ["wind above 60 km/h", "strong wind"]
    assert "expected_response" not in rows["bake"].expectations and rows["ferry-cats"].tags["answerable"] == "false"


def test_exporting_onto_an_existing_name_is_refused(round_trip, capsys):
    native, _, _, _, _, uri = round_trip
    assert export([native.info.run_id, "--mlflow-dataset", NAME, "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"named '{NAME}'" in err and "choose another --mlflow-dataset name" in err


def _load(overrides, tmp):
    from hydra.utils import instantiate

    return instantiate(compose_cfg(overrides, tmp).dataset).load()


def test_an_unknown_name_lists_the_experiments_datasets(round_trip):
    *_, tmp, kb, _ = round_trip
    with pytest.raises(DatasetError) as err:
        _load(["dataset=mlflow", "dataset.name=faq-exprt", f"dataset.documents={kb}"], tmp)
    first, fix = str(err.value).split("\n")
    assert "no evaluation dataset named 'faq-exprt'" in first and f"experiment 'ragbench' has: {NAME}" in first
    assert "field 'dataset.name'" in first and fix.startswith("  fix: name one of those")


def test_expectations_without_a_corpus_name_dataset_documents(round_trip):
    *_, tmp, _, _ = round_trip
    with pytest.raises(DatasetError) as err:
        _load(["dataset=mlflow", f"dataset.name={NAME}"], tmp)
    first, fix = str(err.value).split("\n")
    assert "5 of its 5 records name expected_retrieved_context" in first and "field 'dataset.documents'" in first
    assert "dataset.documents=DIR" in fix


class _Old(http.server.BaseHTTPRequestHandler):
    """A tracking server without the datasets API: 404 for every request."""

    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_error(404, "Not Found")

    do_POST = do_GET

    def log_message(self, *args):
        pass


def test_a_store_without_datasets_is_one_line(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Old)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        from ragbench.datasets.mlflow_dataset import MlflowDatasetAdapter

        uri = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(DatasetError) as err:
            MlflowDatasetAdapter(name="faq", documents=str(tmp_path), tracking_uri=uri).load()
    finally:
        server.shutdown()
    first, fix = str(err.value).split("\n")
    assert "the MLflow store did not serve evaluation datasets" in first and uri in first
    assert "a server of MLflow >= 3.4" in fix
