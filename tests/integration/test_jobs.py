"""Real jobs on the bundled samples with the real MiniLM model, asserting what lands in MLflow."""

from __future__ import annotations

import json
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest

from ragbench.datasets.locomo import CATEGORIES
from ragbench.errors import DatasetError
from ragbench.judge.aggregate import metric_name
from tests.fixtures.components import fails
from tests.fixtures.jobs import run_job

pytestmark = pytest.mark.slow
SAMPLES = Path(str(resources.files("ragbench.datasets").joinpath("samples")))


def _raw_locomo_types() -> Counter:
    data = json.loads((SAMPLES / "locomo/data/locomo10.json").read_text())
    return Counter(CATEGORIES[qa["category"]] for conv in data for qa in conv["qa"] if qa["category"] != 5)


def _raw_qasper_types() -> Counter:
    data = json.loads((SAMPLES / "qasper/qasper-train-v0.3.json").read_text())
    out: Counter = Counter()
    for paper in data.values():
        for qa in paper["qas"]:
            a = qa["answers"][0]["answer"]
            kind = ("unanswerable" if a["unanswerable"] else "extractive" if a["extractive_spans"]
                    else "abstractive" if a["free_form_answer"] else "boolean")
            out[kind] += 1
    return out


def _raw_syllabusqa_types() -> Counter:
    import csv

    with open(SAMPLES / "syllabusqa/data/dataset_split/test.csv", newline="", encoding="utf-8") as fh:
        return Counter(row["question_type"] for row in csv.DictReader(fh))


def _raw_financebench_types() -> Counter:
    lines = (SAMPLES / "financebench/data/financebench_open_source.jsonl").read_text().splitlines()
    return Counter(json.loads(line)["question_type"] for line in lines if line.strip())


def _raw_multihop_types() -> Counter:
    return Counter(q["question_type"] for q in json.loads((SAMPLES / "multihop_rag/MultiHopRAG.json").read_text()))


def _artifact(client, run, name: str) -> str:
    path = client.download_artifacts(run.info.run_id, name)
    return Path(path).read_text()


@pytest.mark.parametrize("dataset,raw_types", [
    ("locomo", _raw_locomo_types), ("qasper", _raw_qasper_types), ("syllabusqa", _raw_syllabusqa_types),
    ("financebench", _raw_financebench_types), ("multihop_rag", _raw_multihop_types),
])
def test_real_job_logs_everything(dataset, raw_types, tmp_path):
    # its own cache: the job must really embed (time/embed_s), whatever other tests cached before
    run, client = run_job([f"dataset={dataset}", "retrieval.topk=5", f"cache.dir={tmp_path / 'cache'}"], tmp_path)
    assert run.info.status == "FINISHED"
    p, t, m = run.data.params, run.data.tags, run.data.metrics
    # params: the flattened resolved config
    assert p["retrieval.topk"] == "5" and p["dataset.name"] == dataset
    assert p["llm._target_"] == "ragbench.generate.extractive.ExtractiveAnswerer"
    # tags: fingerprints, variant, version, commit, the honest generator name
    assert len(t["ragbench.dataset_sha256"]) == 64 and len(t["ragbench.index_sha256"]) == 64
    assert t["ragbench.dataset_variant"] == "sample"
    assert t["ragbench.generator"].startswith("extractive-baseline")
    assert t["ragbench.git_commit"]
    if dataset == "financebench":  # no PDFs: the inflating pages_only corpus is said in the tags
        assert t["ragbench.dataset.corpus"] == "pages_only" and "inflate" in t["ragbench.dataset.corpus_warning"]
    if dataset == "multihop_rag":
        assert t["ragbench.dataset.sample"] == "synthetic"
    # metrics: counts by type equal an independent count over the raw file; per-type metrics exist
    expected = raw_types()
    assert m["counts/queries"] == sum(expected.values())
    for qtype, n in expected.items():
        name = metric_name(qtype)
        assert m[f"dataset/queries_by_type/{name}"] == n
        assert m[f"by_type/{name}/cases/total"] == n
        assert f"by_type/{name}/answer/f1" in m
    for key in ("retrieval/hit_at_1", "retrieval/hit_at_3", "retrieval/hit_at_5", "retrieval/recall_at_5",
                "retrieval/mrr_at_10", "retrieval/chunk/ndcg_at_5", "answer/f1", "answer/em", "answer/f1_successful",
                "cases/failed", "cases/failure_rate", "time/embed_s", "counts/chunks", "counts/documents"):
        assert key in m, key
    assert 0.0 < m["retrieval/hit_at_5"] <= 1.0
    assert m["retrieval/hit_at_1"] <= m["retrieval/hit_at_3"] <= m["retrieval/hit_at_5"]
    assert m["cases/failed"] == 0
    # artifacts: per-case JSONL and table, summary, resolved config
    rows = [json.loads(line) for line in _artifact(client, run, "cases.jsonl").splitlines()]
    assert len(rows) == m["counts/queries"]
    assert {"question", "gold", "answer", "retrieved_ids", "answer/f1"} <= set(rows[0])
    assert len(rows[0]["retrieved_ids"]) == 5
    table = json.loads(_artifact(client, run, "cases_table.json"))
    assert len(table["data"]) == len(rows)
    summary = json.loads(_artifact(client, run, "run.json"))
    assert summary["fingerprints"]["dataset_sha256"] == t["ragbench.dataset_sha256"]
    assert summary["config"]["retrieval"]["topk"] == 5  # the config is run.json's (no config.yaml beside it)
    assert "config.yaml" not in {a.path for a in client.list_artifacts(run.info.run_id)}
    # the dataset is a run input (mlflow.data) with its digest
    inputs = client.get_run(run.info.run_id).inputs.dataset_inputs
    assert inputs and inputs[0].dataset.name == f"{dataset}-sample"


def test_failed_cases_count_as_zero_and_are_reported(tmp_path):
    # 10 of the 18 questions fail: above the default max_failure_rate (0.5), so it is raised to keep the run
    overrides = ["dataset=qasper", "llm._target_=tests.fixtures.components.FlakyAnswerer", "+llm.fail_every=3",
                 "max_failure_rate=1"]
    run, client = run_job(overrides, tmp_path)
    assert run.info.status == "FINISHED"  # the job goes on
    rows = [json.loads(line) for line in _artifact(client, run, "cases.jsonl").splitlines()]
    failed = [r for r in rows if r["status"] == "failed"]
    assert failed and all(fails(r["qid"], 3) for r in failed)
    assert {r["error_type"] for r in failed} == {"TimeoutError"}
    m = run.data.metrics
    assert m["cases/failed"] == len(failed) == m["counts/failed_cases"]
    ok_f1 = [r["answer/f1"] for r in rows if r["status"] == "ok"]
    assert m["answer/f1"] == pytest.approx(sum(ok_f1) / len(rows))
    assert m["answer/f1_successful"] == pytest.approx(sum(ok_f1) / len(ok_f1))


def test_missing_dataset_path_is_a_named_error_before_any_run(tmp_path, caplog):
    with pytest.raises(DatasetError):  # raised on its way up; __main__ turns it into exit 1 (test_main_exit)
        run_job(["dataset=locomo", f"dataset.path={tmp_path}/nowhere"], tmp_path)
    assert not (tmp_path / "mlruns").exists()  # found like a bad config value: no store, no FAILED run
    [err] = [r.getMessage() for r in caplog.records if "dataset.path does not exist" in r.getMessage()]
    assert "dataset 'locomo'" in err and "nowhere" in err and "fix:" in err


def test_same_dataset_same_index_sha_across_topk(tmp_path):
    a, _ = run_job(["dataset=qasper", "retrieval.topk=3", "dataset.sample_size=3"], tmp_path)
    b, _ = run_job(["dataset=qasper", "retrieval.topk=10", "dataset.sample_size=3"], tmp_path)
    assert a.data.tags["ragbench.index_sha256"] == b.data.tags["ragbench.index_sha256"]
    c, _ = run_job(["dataset=qasper", "chunker.search_level=paragraph", "dataset.sample_size=3"], tmp_path)
    assert c.data.tags["ragbench.index_sha256"] != a.data.tags["ragbench.index_sha256"]


def test_child_depth_narrows_section_contexts_on_locomo(tmp_path):
    """parent_depth=2 hands whole LoCoMo sessions to the generator; child_depth=1 keeps only the hit
    turns under the session's date line. Retrieval is untouched, contexts shrink, nothing is lost
    from the hits: every retrieved sentence is still in a context."""
    base = ["dataset=locomo", "dataset.sample_size=30", "retrieval.topk=5", "expander.parent_depth=2"]
    whole, client = run_job([*base, "expander.child_depth=0"], tmp_path)
    parts, _ = run_job([*base, "expander.child_depth=1"], tmp_path)
    assert parts.data.params["expander.child_depth"] == "1"
    for m in ("retrieval/hit_at_5", "retrieval/recall_at_5", "retrieval/mrr_at_10"):
        assert parts.data.metrics[m] == whole.data.metrics[m]
    assert parts.data.metrics["context/tokens"] < 0.5 * whole.data.metrics["context/tokens"]
    assert parts.data.metrics["context/evidence_text_recall"] <= whole.data.metrics["context/evidence_text_recall"]
    rows = [json.loads(x) for x in _artifact(client, parts, "cases.jsonl").splitlines()]
    assert rows and all(r["status"] == "ok" for r in rows)
    for r in rows:
        for cid, kept in zip(r["context_ids"], r["context_parts"], strict=True):
            assert kept and all(k.startswith(cid + ".") for k in kept)  # turns of the session
        turns = {k for kept in r["context_parts"] for k in kept}
        hit_turns = {h.rsplit(".", 1)[0] for h in r["retrieved_ids"]}  # sentence -> its turn
        assert hit_turns == turns
