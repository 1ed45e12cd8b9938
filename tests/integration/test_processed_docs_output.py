"""output.processed_docs=true on a real job: the Markdown trees are in the record folder and the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.jobs import run_job

pytestmark = pytest.mark.slow


def test_processed_docs_logged(tmp_path: Path) -> None:
    run, client = run_job(["dataset=qasper", "dataset.sample_size=2", "retrieval=bm25", "output.processed_docs=true",
                           f"cache.dir={tmp_path / 'cache'}"], tmp_path)
    assert run.info.status == "FINISHED"
    logged = {a.path for a in client.list_artifacts(run.info.run_id, "processed_docs")}
    assert "processed_docs/index.md" in logged and len(logged) == 4  # the sample's 3 papers and the index
    local = sorted(p.name for p in tmp_path.glob("job-*/record/processed_docs/*.md"))
    assert local == sorted(Path(p).name for p in logged)
    text = Path(client.download_artifacts(run.info.run_id, "processed_docs/index.md", str(tmp_path))).read_text()
    assert "| document | file | chunks |" in text


def test_off_by_default(tmp_path: Path) -> None:
    run, client = run_job(["dataset=qasper", "dataset.sample_size=2", "retrieval=bm25",
                           f"cache.dir={tmp_path / 'cache'}"], tmp_path)
    assert not client.list_artifacts(run.info.run_id, "processed_docs")
    assert not list(tmp_path.glob("job-*/record/processed_docs"))
