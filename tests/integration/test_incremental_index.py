"""Incremental indexing on the Qasper sample (issue 44 item 8): after one paper is edited, a job encodes only
that paper's chunks (the run's ``ingest/embedded_texts``) and scores exactly as a cold run on the edited corpus;
``python -m ragbench.cache docs`` lists the papers."""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

import pytest

from ragbench.cache import cli
from ragbench.cache.doc_inventory import doc_pieces
from ragbench.datasets.qasper import QasperAdapter
from ragbench.ingest.hierarchical import HierarchicalChunker
from tests.fixtures.jobs import run_job

pytestmark = pytest.mark.slow
QASPER = Path(str(resources.files("ragbench.datasets").joinpath("samples", "qasper")))
FILE = "qasper-train-v0.3.json"
PAPER = "2003.07723"
VOLATILE = ("latency/", "cache/", "ingest/", "timing/", "time/", "llm/cache", "system/", "saved/",
            "counts/embedded_texts")


def _edit(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    sec, i = next((s, i) for s in data[PAPER]["full_text"] for i, p in enumerate(s["paragraphs"]) if len(p) > 200)
    sec["paragraphs"][i] += " This sentence was added to test incremental indexing."  # a real paragraph
    path.write_text(json.dumps(data), encoding="utf-8")


def _distinct_chunks_of(folder: Path, paper: str) -> int:
    """The paper's searchable chunks as the default chunker makes them (distinct texts: each encoded once)."""
    docs = QasperAdapter(path=str(folder), name="qasper").load().documents
    chunks = HierarchicalChunker().chunk(docs).searchable()
    return len({c.text for c in chunks if c.doc_id == paper})


def _scores(run) -> dict[str, float]:
    return {k: v for k, v in run.data.metrics.items() if not k.startswith(VOLATILE)}


def test_one_edited_paper_is_the_only_one_encoded_and_scores_as_a_cold_run(tmp_path, capsys):
    data = tmp_path / "qasper"
    shutil.copytree(QASPER, data)
    job = ["dataset=qasper", f"dataset.path={data}", "resume=false"]
    cache = tmp_path / "cache"
    first, _ = run_job([*job, f"cache.dir={cache}"], tmp_path / "a")
    assert first.data.metrics["ingest/embedded_texts"] > 0
    rows = doc_pieces(cache, "qasper")
    assert sorted(r.doc_id for r in rows) == sorted(json.loads((data / FILE).read_text()))
    _edit(data / FILE)
    again, _ = run_job([*job, f"cache.dir={cache}"], tmp_path / "b")
    changed = _distinct_chunks_of(data, PAPER)
    assert again.data.metrics["ingest/embedded_texts"] == changed < first.data.metrics["ingest/embedded_texts"]
    assert again.data.metrics["cache/doc_vectors/hits"] == 2 and again.data.metrics["cache/doc_vectors/misses"] == 1
    cold, _ = run_job([*job, f"cache.dir={tmp_path / 'cold-cache'}"], tmp_path / "c")
    assert cold.data.metrics["ingest/embedded_texts"] > changed  # the cold run encodes all three papers
    assert _scores(again) == _scores(cold)
    for tag in ("ragbench.dataset_sha256", "ragbench.index_sha256"):
        assert again.data.tags[tag] == cold.data.tags[tag]
        assert again.data.tags[tag] != first.data.tags[tag]
    assert cli.main(["--dir", str(cache), "docs", "--dataset", "qasper"]) == 0
    out = capsys.readouterr().out
    assert PAPER in out and out.count("qasper") >= 4  # a row per piece: 3 papers, the edited one twice
