"""Issue 38, on a real two-job sweep (``retrieval.topk=3,5`` on the bundled Qasper sample): each record file
is stored once -- the run's artifact store holds the bytes, the job's output folder a pointer
(``stored.json``) that reads back through the store -- and no ``config.yaml`` repeats ``run.json``'s config;
compare, verify and export read the runs; the HTML report's parameter columns come from each record's
config: an edited record changes them, a run name that disagrees with its record does not."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from ragbench.record import CASES_ARTIFACT, RUN_FILE, STORED_FILE, RecordError, RunRecord, StoredRecord
from ragbench.tracking.mlflow_sink import output_files
from tests.fixtures.jobs import python_module

pytestmark = pytest.mark.slow




@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """(folder, tracking uri, client, {topk: MLflow run}, {run id: its output record folder})."""
    from mlflow import MlflowClient

    cwd = tmp_path_factory.mktemp("stored")
    proc = python_module(["ragbench", "-m", "dataset=qasper", "dataset.sample_size=3", "retrieval=bm25",
                    "retrieval.topk=3,5", f"cache.dir={cwd / 'cache'}", f"hydra.sweep.dir={cwd / 'multirun'}"], cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    uri = f"sqlite:///{cwd}/mlruns/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("ragbench").experiment_id])
    jobs = {int(r.data.params["retrieval.topk"]): r for r in runs if r.data.tags.get("ragbench.role") == "job"}
    folders = {}
    for folder in sorted((cwd / "multirun").glob("*/record")):
        pointer = StoredRecord.from_json((folder / STORED_FILE).read_bytes())
        folders[pointer.run_id] = folder
    assert set(jobs) == {3, 5} and set(folders) == {r.info.run_id for r in jobs.values()}
    return cwd, uri, client, jobs, folders


def _artifact(client, run_id: str, name: str, tmp: Path) -> bytes:
    return Path(client.download_artifacts(run_id, name, str(tmp))).read_bytes()


def test_each_record_file_is_stored_once(sweep, tmp_path):
    cwd, uri, client, jobs, folders = sweep
    for run in jobs.values():
        rid = run.info.run_id
        folder = folders[rid]
        assert [p.name for p in folder.iterdir()] == [STORED_FILE]  # the bytes are the store's only
        names = {a.path for a in client.list_artifacts(rid)}
        assert {RUN_FILE, CASES_ARTIFACT, "cases_table.json"} <= names and "config.yaml" not in names
        pointer = StoredRecord.from_json((folder / STORED_FILE).read_bytes())
        assert pointer.tracking_uri == uri and pointer.artifact_uri == run.info.artifact_uri
        stored = {name: _artifact(client, rid, name, tmp_path) for name in (RUN_FILE, CASES_ARTIFACT)}
        assert {n: f["sha256"] for n, f in pointer.files.items()} == {
            n: hashlib.sha256(data).hexdigest() for n, data in stored.items()}
        assert output_files(folder) == stored  # the output folder reads through its pointer
        record = RunRecord.from_json(stored[RUN_FILE])
        assert record.status == "FINISHED" and record.config["retrieval"]["topk"] == int(run.data.params["retrieval.topk"])


def test_compare_verify_and_export_read_the_stored_record(sweep, tmp_path):
    cwd, uri, client, jobs, _ = sweep
    rid = jobs[5].info.run_id
    proc = python_module(["ragbench.verify", rid, "--tracking-uri", uri], cwd)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    proc = python_module(["ragbench.export", rid, "--tracking-uri", uri, "--trec", str(tmp_path / "run.txt")], cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "run.txt").read_text().strip()
    proc = python_module(["ragbench.compare", "--json", str(tmp_path / "cmp.json")], cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {r["run"] for r in json.loads((tmp_path / "cmp.json").read_text())["records"]} == {
        r.info.run_id for r in jobs.values()}


def _sweep_table(html: str) -> tuple[list[str], dict[str, list[str]]]:
    table = re.search(r'<table class="sortable sweep".*?</table>', html, re.S).group(0)
    head = re.findall(r"<th(?:\s[^>]*)?>(.*?)</th>", table)
    rows = {m[0]: re.findall(r"<td[^>]*>(.*?)</td>", m[1]) for m in re.findall(r'<tr data-run="([^"]+)">(.*?)</tr>',
                                                                                 table, re.S)}
    return head, rows


def test_the_report_parameters_follow_the_record_not_the_run_name(sweep, tmp_path):
    cwd, _, client, jobs, folders = sweep
    small = jobs[3]
    assert "topk=3" in small.info.run_name
    proc = python_module(["ragbench.compare", "--report", str(tmp_path / "before")], cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    head, rows = _sweep_table((tmp_path / "before" / "report.html").read_text())
    topk = head.index("topk")
    assert {rows[r.info.run_id][topk] for r in jobs.values()} == {"3", "5"}
    # the record edited in the artifact store (a local file store): its config says topk 4, its name 3
    stored = Path(unquote(urlparse(small.info.artifact_uri).path)) / RUN_FILE
    original = stored.read_bytes()
    data = json.loads(original)
    data["config"]["retrieval"]["topk"] = 4
    stored.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    try:
        proc = python_module(["ragbench.compare", "--report", str(tmp_path / "after")], cwd)
        assert proc.returncode == 0, proc.stderr[-3000:]
        head, rows = _sweep_table((tmp_path / "after" / "report.html").read_text())
        assert rows[small.info.run_id][head.index("topk")] == "4"  # the record's, not the name's 3
        assert rows[jobs[5].info.run_id][head.index("topk")] == "5"
        with pytest.raises(RecordError, match=f"{RUN_FILE} of run {small.info.run_id} .* not the file the job"):
            output_files(folders[small.info.run_id])  # the pointer's sha256 catches the edit
    finally:
        stored.write_bytes(original)
