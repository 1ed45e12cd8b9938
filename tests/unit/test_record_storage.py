"""Issue 38.2: each record file is stored once. Once the artifact store holds a job's ``run.json`` and
``cases.jsonl`` at the sizes written, the output folder keeps only ``stored.json``, a pointer to them;
``record.folder_files`` reads a folder of either layout (the pointer, or the files themselves: a record not
logged, or a run from before the pointer whose folder kept a second copy). The real store is in
tests/integration/test_record_storage.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragbench.record import (
    CASES_ARTIFACT,
    RUN_FILE,
    STORED_FILE,
    RecordError,
    RecordWriter,
    RunRecord,
    StoredRecord,
    folder_files,
)
from ragbench.tracking.mlflow_sink import log_files, public_uri


class Store:
    """An artifact store in memory (the two MlflowTracker calls ``log_files`` makes); ``short`` cuts a file."""

    uri = "sqlite:///mlruns/mlflow.db"

    def __init__(self, short: str = "") -> None:
        self.artifacts: dict[str, bytes] = {}
        self.short = short

    def log_folder(self, run_id: str, folder: Path) -> None:
        self.artifacts = {p.name: p.read_bytes()[: 10 if p.name == self.short else None] for p in folder.iterdir()}

    def stored_files(self, run_id: str) -> tuple[str, dict[str, int]]:
        return f"file:///artifacts/{run_id}", {name: len(data) for name, data in self.artifacts.items()}

    def fetch(self, pointer: StoredRecord, name: str) -> bytes:
        assert pointer.run_id == "r1"
        return self.artifacts[name]


def _job_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "record"
    writer = RecordWriter(folder, RunRecord(name="topk=5 #0", job_hash="h", config={"retrieval": {"topk": 5}}))
    (folder / CASES_ARTIFACT).write_text('{"qid": "q1"}\n', encoding="utf-8")
    writer.finish(writer.record.ended("FINISHED"))
    return folder


def test_the_folder_keeps_a_pointer_once_the_store_holds_the_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = _job_folder(tmp_path)
    written = {name: (folder / name).read_bytes() for name in (RUN_FILE, CASES_ARTIFACT)}
    store = Store()
    log_files(store, "r1", folder)  # type: ignore[arg-type]
    assert sorted(p.name for p in folder.iterdir()) == [STORED_FILE]  # the bytes are the store's only
    pointer = StoredRecord.from_json((folder / STORED_FILE).read_bytes())
    assert pointer.run_id == "r1" and pointer.artifact_uri == "file:///artifacts/r1"
    assert pointer.tracking_uri == f"sqlite:///{tmp_path.resolve()}/mlruns/mlflow.db"  # absolute: read anywhere
    assert {n: f["bytes"] for n, f in pointer.files.items()} == {n: len(d) for n, d in written.items()}
    assert folder_files(folder, store.fetch) == written  # read back through the store, checked


def test_a_store_holding_less_keeps_the_files_and_raises(tmp_path):
    folder = _job_folder(tmp_path)
    with pytest.raises(RecordError, match=f"holds {RUN_FILE} at 10 bytes"):
        log_files(Store(short=RUN_FILE), "r1", folder)  # type: ignore[arg-type]
    assert {RUN_FILE, CASES_ARTIFACT} <= {p.name for p in folder.iterdir()} and not (folder / STORED_FILE).exists()


def test_a_file_the_store_does_not_list_keeps_the_files(tmp_path):
    folder = _job_folder(tmp_path)
    store = Store()
    store.log_folder = lambda run_id, folder: None  # type: ignore[method-assign]  # an upload that lost them
    with pytest.raises(RecordError, match=f"does not list {RUN_FILE} after its upload"):
        log_files(store, "r1", folder)  # type: ignore[arg-type]
    assert (folder / RUN_FILE).is_file() and not (folder / STORED_FILE).exists()


def test_a_store_that_gives_no_sizes_is_checked_by_name(tmp_path):
    folder = _job_folder(tmp_path)
    store = Store()
    store.stored_files = lambda run_id: ("s3://b/r1", dict.fromkeys(store.artifacts))  # type: ignore[method-assign]
    log_files(store, "r1", folder)  # type: ignore[arg-type]
    assert [p.name for p in folder.iterdir()] == [STORED_FILE]


def test_a_file_the_store_changed_is_named(tmp_path):
    folder = _job_folder(tmp_path)
    store = Store()
    log_files(store, "r1", folder)  # type: ignore[arg-type]
    store.artifacts[RUN_FILE] = store.artifacts[RUN_FILE].replace(b'"topk": 5', b'"topk": 7')
    with pytest.raises(RecordError, match=f"{RUN_FILE} of run r1 .* is not the file the job wrote"):
        folder_files(folder, store.fetch)


def test_an_old_folder_with_its_own_copy_reads_as_it_is(tmp_path):
    folder = _job_folder(tmp_path)  # the layout before the pointer: the files stayed beside their upload

    def fetch(pointer: StoredRecord, name: str) -> bytes:
        raise AssertionError("the folder's own files are read, not the store")

    files = folder_files(folder, fetch)
    assert RunRecord.from_json(files[RUN_FILE]).status == "FINISHED" and files[CASES_ARTIFACT] == b'{"qid": "q1"}\n'


def test_a_folder_without_a_record_or_a_damaged_pointer_is_one_line(tmp_path):
    with pytest.raises(RecordError, match=f"no {RUN_FILE} and no {STORED_FILE}"):
        folder_files(tmp_path, lambda p, n: b"")
    (tmp_path / STORED_FILE).write_text(json.dumps({"format": "ragbench-stored/1", "run_id": "r1"}))
    with pytest.raises(RecordError, match="needs run_id, tracking_uri and each file's bytes and sha256"):
        folder_files(tmp_path, lambda p, n: b"")


def test_a_new_job_in_the_same_folder_drops_the_old_pointer(tmp_path):
    folder = _job_folder(tmp_path)
    log_files(Store(), "r1", folder)  # type: ignore[arg-type]
    RecordWriter(folder, RunRecord(name="again", job_hash="h", config={}))  # hydra.run.dir reused
    assert not (folder / STORED_FILE).exists()
    assert RunRecord.from_json(folder_files(folder, lambda p, n: b"")[RUN_FILE]).name == "again"


@pytest.mark.parametrize(("uri", "kept"), [
    ("http://user:s3cret@mlflow.example:5000/", "http://mlflow.example:5000/"),
    ("https://mlflow.example/", "https://mlflow.example/"),
    ("sqlite:////abs/mlflow.db", "sqlite:////abs/mlflow.db"),
])
def test_the_pointer_keeps_no_credentials(uri: str, kept: str, tmp_path: Any):
    assert public_uri(uri) == kept
