"""MLflow scorers as a judge (issue 40, item 5): a real job with ``judge=[lexical,mlflow]`` through the loopback
LLM server. Each case's ``judge/mlflow/<name>`` equals the same scorer called directly on the same inputs (the
case's question, answer, gold and passages, read from its record); the keys are declared (direction included),
verify re-aggregates them; the scorers' LLM requests go through ragbench's endpoint (the reply cache serves a
rerun); an unknown scorer is one line listing the built-in ones."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from ragbench.errors import ConfigError
from tests.fixtures.jobs import compose_cfg, run_job
from tests.fixtures.llm_server import LLMServer, default_reply

ROOT = Path(__file__).resolve().parents[2]
QA = [
    {"id": "fare", "question": "How much is an adult single ferry ticket?", "answers": ["4.20 euros"],
     "evidence": [{"text": "A single ticket costs 4.20 euros for adults", "doc_id": "ferry.md"}]},
    {"id": "wind", "question": "When is the ferry service suspended?", "answers": ["wind above 60 km/h"],
     "evidence": [{"text": "the wind at the harbour mouth exceeds 60 km/h", "doc_id": "ferry.md"}]},
    {"id": "fines", "question": "What is the late fee for a film?", "answers": ["0.25 euros a day"],
     "evidence": [{"text": "a late fee of 0.25 euros a day", "doc_id": "library.md"}]},
    {"id": "bake", "question": "How hot is the oven for the loaf?", "answers": ["230 °C"],
     "evidence": [{"text": "bake it at 230 °C for 40 minutes in a covered pot", "doc_id": "bread.md"}]},
]
SCORERS = ["RetrievalGroundedness", "Correctness", "RetrievalRelevance", "tests.fixtures.mlflow_scorers:mentions_gold",
           "tests.fixtures.mlflow_scorers:answer_words"]


def responder(body: dict) -> str:
    """MLflow's judge prompts (they ask for a "result"): yes or no, decided by the prompt's hash, so verdicts
    differ between cases and equal prompts get equal verdicts; the generator: the fixture's default reply."""
    content = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    if '"result"' not in content:
        return default_reply(body)
    yes = int(hashlib.sha256(content.encode()).hexdigest(), 16) % 3 != 0
    return json.dumps({"rationale": f"fixture {len(content)}", "result": "yes" if yes else "no"})


def _args(server: LLMServer, kb: Path, qa: Path, tmp: Path) -> list[str]:
    return ["dataset=custom", f"dataset.path={kb}", f"dataset.qa_file={qa}", "retrieval=bm25", "retrieval.topk=3",
            "llm=openai_compatible", "llm.model=openai/gen-model", f"llm.api_base={server.url}",
            "judge=[lexical,mlflow]", "judge.model=openai/judge-model", f"judge.api_base={server.url}",
            f"judge.scorers=[{','.join(SCORERS)}]", "judge.lower_is_better=[answer_words]", f"cache.dir={tmp}/cache"]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-test")
    tmp = tmp_path_factory.mktemp("mlflow-scorers")
    kb = tmp / "kb"
    shutil.copytree(ROOT / "examples" / "docs", kb)
    qa = tmp / "qa.jsonl"
    qa.write_text("".join(json.dumps(q) + "\n" for q in QA), encoding="utf-8")
    with LLMServer(responder=responder) as server:
        run, client = run_job(_args(server, kb, qa, tmp), tmp)
        sent = server.count
        again, _ = run_job(_args(server, kb, qa, tmp), tmp)
        rerun_sent = server.count - sent
        cases = [json.loads(line) for line in Path(client.download_artifacts(run.info.run_id, "cases.jsonl"))
                 .read_text(encoding="utf-8").splitlines()]
        direct = _direct(server, cases)
    mp.undo()
    yield run, again, client, cases, direct, sent, rerun_sent, tmp


def _direct(server: LLMServer, cases: list[dict]) -> dict[str, dict[str, float]]:
    """Each scorer called directly (``scorer(...)``, no ragbench judge) on each case's inputs from its record,
    its LLM the same server (through a client of its own: no cache)."""
    from mlflow.genai.scorers import Correctness, RetrievalGroundedness, RetrievalRelevance

    from ragbench.judge.mlflow_scorers import case_trace, model_uri, register
    from ragbench.llm.endpoint import LLMEndpoint
    from ragbench.types import Answer, Context, Level, Query
    from tests.fixtures.mlflow_scorers import answer_words, mentions_gold

    client = LLMEndpoint.of("judge", None, {"model": "openai/judge-model", "api_base": server.url}).client()
    register(client)
    uri = model_uri(client)
    by_qa = {q["id"]: q for q in QA}
    out = {}
    for row in cases:
        qa = by_qa[row["qid"]]
        expectations = {"expected_response": qa["answers"][0], "expected_retrieved_context": [
            {"content": e["text"], "doc_uri": e["doc_id"]} for e in qa["evidence"]]}
        trace = case_trace(Query(qid=row["qid"], text=row["question"], answers=(), question_type="x"),
                           [Context(chunk_id=c["chunk_id"], text=c["text"], title=c["title"], level=Level.PARAGRAPH,
                                    hit_ids=()) for c in row["contexts"]], Answer(text=row["answer"], model="m"))
        inputs, outputs = {"question": row["question"]}, row["answer"]

        def mean(feedbacks):
            values = [1.0 if str(getattr(f.value, "value", f.value)) == "yes" else float(f.value) if not isinstance(
                f.value, str) and not hasattr(f.value, "value") else 0.0 for f in feedbacks]
            return sum(values) / len(values)

        correct = Correctness(model=uri)(inputs=inputs, outputs=outputs, expectations=expectations)
        out[row["qid"]] = {
            "judge/mlflow/retrieval_groundedness": mean(RetrievalGroundedness(model=uri)(trace=trace)),
            "judge/mlflow/correctness": 1.0 if correct.value == "yes" else 0.0,
            "judge/mlflow/retrieval_relevance": mean(RetrievalRelevance(model=uri)(trace=trace)),
            "judge/mlflow/mentions_gold": float(mentions_gold(outputs=outputs, expectations=expectations)),
            "judge/mlflow_lower/answer_words": float(answer_words(outputs=outputs)),
        }
    return out


def test_each_scorer_equals_the_scorer_called_directly(job):
    run, _, _, cases, direct, *_ = job
    assert run.info.status == "FINISHED"
    logged = {row["qid"]: {k: row[k] for k in direct[row["qid"]]} for row in cases}
    assert logged == direct
    assert {case["judge/mlflow/correctness"] for case in direct.values()} == {0.0, 1.0}  # verdicts differ
    assert all(row["judge_notes"]["mlflow"]["correctness"] for row in cases)  # the rationales are kept


def test_the_scores_are_declared_metrics_that_verify_and_compare_read(job):
    run, _, client, cases, *_, tmp = job
    from ragbench.metric_keys import metric_info
    from ragbench.verify import main as verify

    metrics = run.data.metrics
    for key in ("judge/mlflow/correctness", "judge/mlflow/retrieval_groundedness", "judge/mlflow/mentions_gold"):
        assert metrics[key] == pytest.approx(sum(row[key] for row in cases) / len(cases))
        assert metric_info(key).higher_is_better and metric_info(key).kind == "score"
    assert not metric_info("judge/mlflow_lower/answer_words").higher_is_better
    assert metrics["judge/mlflow/correctness/judge_failed"] == 0
    assert verify([run.info.run_id, "--tracking-uri", f"sqlite:///{tmp}/mlruns/mlflow.db"]) == 0


def test_the_scorers_llm_goes_through_ragbench_s_reply_cache(job):
    run, again, *_, sent, rerun_sent, _ = job
    assert sent > 0 and rerun_sent == 0
    assert again.data.metrics["judge/mlflow/correctness"] == run.data.metrics["judge/mlflow/correctness"]


def test_an_unknown_scorer_is_one_line_listing_the_built_in_ones(job, monkeypatch):
    from hydra.utils import instantiate

    from ragbench.judge.build import build_judges

    *_, tmp = job
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cfg = compose_cfg(["judge=mlflow", "judge.scorers=[Corectness]", "judge.model=openai/j", "llm=openai_compatible",
                       "judge.api_base=http://127.0.0.1:9/v1"], tmp)
    with pytest.raises(ConfigError) as err:
        build_judges(cfg.judge, instantiate)
    text = str(err.value)
    assert "\n" not in text and "'Corectness' is not an MLflow built-in scorer" in text
    assert "RetrievalGroundedness" in text and "Correctness" in text and "pkg.module:obj" in text
