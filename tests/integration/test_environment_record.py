"""One environment list: a real job's record (``run.json``'s ``versions``) and its MLflow ``ragbench.env.*``
tags come from ``ragbench.identity.environment`` and are equal. Before, python, litellm, bm25s and hydra
were tags only, and transformers was in the record only."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragbench.record import RunRecord
from tests.fixtures.jobs import run_job

pytestmark = pytest.mark.slow


def test_a_jobs_record_and_its_tags_hold_the_same_environment(tmp_path):
    run, client = run_job(["dataset=qasper", "dataset.sample_size=2", "judge=lexical", "retrieval=bm25",
                           f"cache.dir={tmp_path / 'cache'}"], tmp_path)
    assert run.info.status == "FINISHED"
    text = Path(client.download_artifacts(run.info.run_id, "run.json", str(tmp_path))).read_text()
    record = RunRecord.from_json(text)
    assert record.kind == "job"
    tags = {k: v for k, v in run.data.tags.items() if k.startswith("ragbench.env.")}
    assert tags == {f"ragbench.env.{k}": v for k, v in record.versions.items()}
    assert {"python", "os", "ragbench", "transformers", "litellm", "bm25s", "hydra", "torch"} <= set(
        record.versions)
    assert record.versions["ragbench"] == run.data.tags["ragbench.version"]
