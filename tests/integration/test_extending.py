"""Extending ragbench from a user's own package, no ragbench file touched: a retriever, a reranker, a retrieval
metric (``RetrievalScorer``) and a dataset adapter, their configs in a folder added by ``hydra.searchpath``;
one real job (``python -m ragbench``) logs the custom metric and ``ragbench.verify`` recomputes it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

FILES = {
    "myext/__init__.py": "",
    "myext/retriever.py": '''
        """Word-overlap retriever: a chunk's score is how many distinct query words it holds."""
        import re

        from ragbench.types import Hit

        class OverlapRetriever:
            needs_vectors = False

            def __init__(self, *, lowercase: bool = True) -> None:
                self.lowercase = lowercase

            def _words(self, text):
                return set(re.findall(r"\\w+", text.lower() if self.lowercase else text))

            def build(self, *, ids, texts, vectors):
                self.rows = [(i, self._words(t)) for i, t in zip(ids, texts)]

            def search(self, *, texts, vectors, k):
                out = []
                for text in texts:
                    q = self._words(text)
                    ranked = sorted(((len(q & w), i) for i, w in self.rows), key=lambda s: -s[0])[:k]
                    out.append([Hit(i, float(s), r + 1) for r, (s, i) in enumerate(ranked)])
                return out

            def params(self):
                return {"lowercase": self.lowercase}
    ''',
    "myext/reranker.py": '''
        """Reranker: ties broken by the shorter chunk id, ranks renumbered."""
        from ragbench.types import Hit

        class TieBreak:
            needs_vectors = False
            needs_votes = False

            def rerank(self, query, hits, *, tree, k, query_vector, chunk_vectors):
                ordered = sorted(hits, key=lambda h: (-h.score, len(h.chunk_id)))[:k]
                return [Hit(h.chunk_id, h.score, r + 1) for r, h in enumerate(ordered)]
    ''',
    "myext/metrics.py": '''
        """R-precision at the dataset's evidence unit: relevant hits among the first R / R."""
        from ragbench.judge.metric_info import MetricInfo

        class RPrecision:
            metrics = {"retrieval/r_precision": MetricInfo(
                "relevant hits in the first R / R, R = relevant evidence units", "trec_eval Rprec",
                kind="diagnostic")}

            def score(self, *, ranked, covered, qrels, chunk_qrels, ks):
                r = sum(grade > 0 for grade in qrels.values())
                found = sum(any(qrels.get(u, 0) > 0 for u in units) for units in covered[:r])
                return {"retrieval/r_precision": found / r if r else 0.0}
    ''',
    "myext/data.py": '''
        """Qasper's bundled sample, searched across every paper (a protocol of the user's choice)."""
        from ragbench.datasets.qasper import QasperAdapter

        class CorpusQasper(QasperAdapter):
            default_scope = "corpus"
    ''',
    "conf/retrieval/overlap.yaml": '''
        topk: 5
        retriever:
          _target_: myext.retriever.OverlapRetriever
          lowercase: true
    ''',
    "conf/reranker/tiebreak.yaml": '''
        candidates: 10
        rerankers:
          tiebreak:
            _target_: myext.reranker.TieBreak
    ''',
    "conf/dataset/corpus_qasper.yaml": '''
        defaults:
          - qasper
          - _self_
        _target_: myext.data.CorpusQasper
    ''',
    "conf/experiment/rprecision.yaml": '''
        # @package _global_
        metrics:
          retrieval:
            - _target_: myext.metrics.RPrecision
    ''',
}


def test_a_user_package_adds_a_retriever_reranker_metric_and_dataset(tmp_path):
    for rel, text in FILES.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    job = subprocess.run(
        [sys.executable, "-m", "ragbench", f"hydra.searchpath=[file://{tmp_path}/conf]", "dataset=corpus_qasper",
         "retrieval=overlap", "reranker=tiebreak", "experiment=rprecision", "stages=retrieval",
         f"cache.dir={tmp_path}/cache", f"tracking.uri={uri}", f"tracking.artifact_root={tmp_path}/mlruns/artifacts"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert job.returncode == 0, job.stderr[-3000:]

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    params, metrics = run.data.params, run.data.metrics
    assert params["retrieval.retriever._target_"] == "myext.retriever.OverlapRetriever"
    assert params["reranker.rerankers.tiebreak._target_"] == "myext.reranker.TieBreak"
    assert params["metrics.retrieval.0._target_"] == "myext.metrics.RPrecision"
    # the minimal retrieval config has no scope: the adapter's declaration (corpus) holds, no per-paper search
    assert "retrieval.scope" not in params and "retrieval/scope_corpus_fallbacks" not in metrics
    assert 0.0 < metrics["retrieval/r_precision"] <= 1.0 and "retrieval/hit_at_5" in metrics

    check = subprocess.run([sys.executable, "-m", "ragbench.verify", run.info.run_id, "--tracking-uri", uri],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "OK: every metric matches to 1e-9" in check.stdout
