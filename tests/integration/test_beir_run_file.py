"""A real BM25 job on a BEIR-format folder at document level: ``verify`` reproduces it, ``export`` writes
TREC files on which pytrec_eval gives the logged document figures, and ``retrieval=run_file`` of the exported
ranking reproduces every retrieval metric of the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragbench.export import main as export
from ragbench.verify import main as verify
from tests.fixtures.beir import write_beir
from tests.fixtures.jobs import run_job

pytestmark = pytest.mark.slow
JOB = ["dataset=beir", "chunker=document", "stages=retrieval", "retrieval.topk=20", "retrieval.search_depth=20"]


def _trec(path: Path, width: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        cols = line.split()
        assert len(cols) == width
        out.setdefault(cols[0], {})[cols[2]] = float(cols[-2] if width == 6 else cols[-1])
    return out


def test_export_then_run_file_reproduces_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    data = write_beir(tmp_path / "beir")
    base = [*JOB, f"dataset.path={data}", f"cache.dir={tmp_path}/cache"]
    run, _ = run_job([*base, "retrieval=bm25"], tmp_path)
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    logged = run.data.metrics
    assert logged["retrieval/doc/self_hit_ignored"] == pytest.approx(1 / 8)  # "glacier-2" retrieves itself
    assert verify([run.info.run_id, "--tracking-uri", uri]) == 0

    # document level: trec_eval's figures on the exported files are the logged ones
    assert export([run.info.run_id, "--trec", str(tmp_path / "doc.run"), "--qrels", str(tmp_path / "doc.qrels"),
                   "--tracking-uri", uri]) == 0
    qrels = {q: {d: int(g) for d, g in docs.items()} for q, docs in _trec(tmp_path / "doc.qrels", 4).items()}
    official = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.20", "map_cut.20"})
    got = official.evaluate(_trec(tmp_path / "doc.run", 6))
    for ours, theirs in (("ndcg_at_10", "ndcg_cut_10"), ("recall_at_20", "recall_20"), ("map_at_20", "map_cut_20")):
        mean = sum(v[theirs] for v in got.values()) / len(got)
        assert logged[f"retrieval/doc/{ours}"] == pytest.approx(mean, abs=1e-9)

    # chunk level, scored again as another system's run: every retrieval metric of the run, exactly
    assert export([run.info.run_id, "--trec", str(tmp_path / "chunk.run"), "--level", "chunk",
                   "--tracking-uri", uri]) == 0
    again, _ = run_job([*base, "retrieval=run_file", f"retrieval.path={tmp_path / 'chunk.run'}"], tmp_path)
    keys = [k for k in logged if k.startswith(("retrieval/", "context/", "headline/", "by_type/"))
            and not k.endswith("latency_ms")]  # the search's time (retrieval/hop/latency_ms) is no score
    assert len(keys) > 100
    assert {k: again.data.metrics.get(k) for k in keys} == {k: logged[k] for k in keys}
    assert export(["0" * 32, "--trec", str(tmp_path / "x.run"), "--tracking-uri", uri]) == 2
