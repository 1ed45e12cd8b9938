"""reranker=coverage and sampling=openviking in real jobs (bundled samples, the default dense retriever)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragbench.datasets import openviking_sampling as ov
from ragbench.datasets.base import bundled_sample
from tests.fixtures.jobs import run_job

pytestmark = pytest.mark.slow


def _cases(client, run, tmp_path: Path) -> list[dict]:
    path = client.download_artifacts(run.info.run_id, "cases.jsonl", str(tmp_path))
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def test_coverage_reranker_job(tmp_path: Path) -> None:
    run, client = run_job(["dataset=qasper", "dataset.sample_size=3", "reranker=coverage",
                           f"cache.dir={tmp_path / 'cache'}"], tmp_path)
    assert run.info.status == "FINISHED"
    assert run.data.params.get("reranker.rerankers.coverage._target_") == "ragbench.rerank.coverage.CoverageReranker"
    assert "rerank/fallbacks" not in run.data.metrics or run.data.metrics["rerank/fallbacks"] == 0


def test_openviking_sampling_job(tmp_path: Path) -> None:
    run, client = run_job(["dataset=financebench", "sampling=openviking", "retrieval=bm25",
                           f"cache.dir={tmp_path / 'cache'}"], tmp_path)
    assert run.info.status == "FINISHED"
    qids = sorted(c["qid"] for c in _cases(client, run, tmp_path))
    assert qids == sorted(ov.select("financebench", bundled_sample("financebench")).qids)
