"""`python -m ragbench.datasets generate` against the loopback OpenAI-compatible server with scripted replies:
the written set loads with dataset=custom, bad quotes / low critic scores / malformed replies are dropped and
counted, a killed run resumes without repeating a request, bad input is one named error, and the generated
set sweeps end to end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragbench.datasets.__main__ import main
from ragbench.datasets.custom import CustomAdapter
from ragbench.datasets.evalgen.journal import journal_path
from tests.fixtures.llm_server import LLMServer, Step, generation_reply

ROOT = Path(__file__).resolve().parents[2]
KEY = "RAGBENCH_GEN_KEY"
FERRY = """# Ferry handbook

## Schedule

The ferry leaves the north pier at 7:15 every weekday morning and returns at 18:30.
On Sundays the first ferry leaves at 9:00 because the crew changes shifts at the harbour.

## Tickets

A day pass costs 6 euros for adults and 3 euros for children under twelve years.
Bicycles travel free of charge, but they must be tied to the rail on the lower deck.

## History

The ferry line opened on 12 May 1998 after the old bridge to the island was closed.
The first captain of the line was Maria Jensen, who sailed the route for twenty years.
"""
LIGHTHOUSE = """Lighthouse notes

The lighthouse keeper logs the weather at noon and at midnight in a leather book.
The lamp was converted from oil to electricity in 1952, which doubled its range at sea.

Visiting hours

Visitors may climb the 212 steps of the tower between April and October on weekends.
Children must be accompanied by an adult, and dogs are not allowed inside the tower.
"""


def critic(g: int, s: int, a: int) -> Step:
    return Step(text=json.dumps({"groundedness": g, "standalone": s, "answerability": a, "reasoning": "scripted"}))


@pytest.fixture(scope="module")
def server():
    with LLMServer(responder=generation_reply) as srv:
        yield srv


@pytest.fixture()
def llm(server, monkeypatch):
    monkeypatch.setenv(KEY, "sk-test")
    server.reset()
    server.responder = generation_reply
    yield server
    server.reset()


@pytest.fixture()
def docs(tmp_path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "ferry.md").write_text(FERRY, encoding="utf-8")
    (folder / "lighthouse.txt").write_text(LIGHTHOUSE, encoding="utf-8")
    return folder


def args(tmp_path: Path, docs: Path, server: LLMServer, *extra: str) -> list[str]:
    llm = ["llm=openai_compatible", f"llm.api_base={server.url}", "llm.model=openai/gen-model",
           f"llm.api_key_env={KEY}", "llm.max_concurrency=1", "llm.num_retries=1", "llm.backoff_s=0.01",
           "critic.model=openai/critic-model"]
    if any(e.startswith("llm=") for e in extra):
        llm = []
    return ["generate", "dataset=custom", f"dataset.path={docs}", f"out={tmp_path / 'eval.json'}", *llm,
            "dedup.method=lexical", f"cache.dir={tmp_path / 'cache'}", *extra]


def generate(tmp_path: Path, docs: Path, server: LLMServer, *extra: str) -> dict:
    assert main(args(tmp_path, docs, server, *extra)) == 0
    return json.loads((tmp_path / "eval.json").read_text(encoding="utf-8"))


def test_written_set_loads_with_dataset_custom(tmp_path, docs, llm):
    data = generate(tmp_path, docs, llm, "n=6", "split=0.5")
    samples, meta = data["samples"], data["metadata"]
    assert len(samples) == 6 and meta["counts"]["kept"] == 6
    prov = meta["provenance"]
    assert prov["generator"]["model"] == "openai/gen-model" and prov["critic"]["model"] == "openai/critic-model"
    assert len(prov["documents"]) == 64 and prov["seed"] == 42 and len(prov["prompt_hash"]) == 16
    assert {r["model"] for r in llm.requests} == {"gen-model", "critic-model"}
    es = CustomAdapter(name="custom", path=str(docs), qa_file=str(tmp_path / "eval.json")).load()
    assert [q.qid for q in es.queries] == [s["id"] for s in samples]
    assert es.stats["evidence_quote_not_found"] == 0
    for q, s in zip(es.queries, samples, strict=True):
        assert q.question_type == s["question_type"] and q.answerable == s["answerable"]
        assert all(e.relevance == 3 and e.doc_id for e in q.evidence)
        assert s["difficulty"] in ("easy", "medium", "hard")
    train = json.loads((tmp_path / "eval.train.json").read_text())["samples"]
    test = json.loads((tmp_path / "eval.test.json").read_text())["samples"]
    assert sorted(s["id"] for s in train + test) == sorted(s["id"] for s in samples)
    assert not journal_path(tmp_path / "eval.json").exists()  # finished: the journal is gone
    assert main(["inspect", str(tmp_path / "eval.json")]) == 0


def test_pdf_pages_give_evidence_too(tmp_path, docs, llm):
    from tests.unit.datasets.conftest import make_pdf

    (docs / "report.pdf").write_bytes(make_pdf([
        "Annual report 2023\nRevenue of the harbour company grew by 12 percent in 2023 thanks to the new line.",
        "Outlook\nThe board expects passenger numbers to rise again next year after the bridge repairs."]))
    data = generate(tmp_path, docs, llm, "n=3", "types.factual=1", "types.multi_hop=0", "types.comparison=0",
                    "types.temporal=0", "types.unanswerable=0")
    from_pdf = [s for s in data["samples"] if s["evidence"][0]["document_id"] == "report.pdf"]
    assert from_pdf and from_pdf[0]["evidence"][0]["node_id"].startswith("report.pdf#s")
    es = CustomAdapter(name="custom", path=str(docs), qa_file=str(tmp_path / "eval.json")).load()
    assert es.stats["evidence_quote_not_found"] == 0 and "report.pdf" in {d.doc_id for d in es.documents}


ELSEWHERE = {"lamp": "The ferry line opened on 12 May 1998", "": "The lamp was converted from oil to electricity"}


@pytest.mark.parametrize("quote,reason", [
    ("The ferry flies to the moon every Sunday at dawn.", "quote_not_found"),
    (None, "quote_outside_passages"),  # a sentence of the documents, but not of the passage shown
    ("7:15", "quote_too_short"),
], ids=["not-in-documents", "other-passage", "too-short"])
def test_a_quote_that_does_not_check_out_is_dropped_with_its_reason(tmp_path, docs, llm, capsys, quote, reason):
    first = []

    def responder(body):
        content = body["messages"][1]["content"]
        if first or '"groundedness"' in body["messages"][0]["content"]:
            return generation_reply(body)
        first.append(1)
        chosen = quote or ELSEWHERE["lamp" if "lamp was converted" in content else ""]
        return json.dumps({"question": "When does the ferry leave the pier?", "answer": "7:15",
                           "quotes": [chosen], "question_type": "factual"})

    llm.responder = responder
    data = generate(tmp_path, docs, llm, "n=2", "max_attempts=2", "types.factual=1", "types.multi_hop=0",
                    "types.comparison=0", "types.temporal=0", "types.unanswerable=0")
    assert data["metadata"]["counts"]["dropped"] == {reason: 1}
    assert [s["id"] for s in data["samples"]] == ["gen_00001"]
    out = capsys.readouterr().out  # the summary: kept per type, dropped by reason, cost so far
    assert "1 kept of 2 tried" in out and reason in out and "cost so far: $0.0000" in out
    assert llm.count == 3  # no critic call for the dropped item: generator, generator, critic


@pytest.mark.parametrize("scores,kept,reason", [
    ((3, 3, 3), True, None),
    ((2, 5, 5), False, "critic_low_groundedness"),
    ((5, 2, 5), False, "critic_low_standalone"),
    ((5, 5, 1), False, "critic_low_answerability"),
], ids=["at-threshold", "ungrounded", "not-standalone", "unanswerable"])
def test_the_critic_threshold_drops_what_it_should(tmp_path, docs, llm, capsys, scores, kept, reason):
    llm.script(Step(), critic(*scores))
    if not kept:  # nothing kept: a failure naming the reason, and no empty set written
        assert main(args(tmp_path, docs, llm, "n=1", "max_attempts=1", "critic.threshold=3")) == 1
        assert f"1 of 1 tried were dropped as {reason}" in capsys.readouterr().err
        assert not (tmp_path / "eval.json").exists()
        return
    data = generate(tmp_path, docs, llm, "n=1", "max_attempts=1", "critic.threshold=3")
    assert len(data["samples"]) == 1 and data["metadata"]["counts"]["dropped"] == {}
    assert data["samples"][0]["critic"]["groundedness"] == 3


@pytest.mark.parametrize("script,requests,dropped", [
    ([Step(text="Sure! Here is a question about ferries.")], 3, {}),
    ([Step(text="garbage"), Step(text='{"question": "When does the ferry')], 2, {"malformed_reply": 1}),
    ([Step(), Step(text="great question"), Step(text="5/5")], 3, {"critic_malformed_reply": 1}),
], ids=["retried", "generator-dropped", "critic-dropped"])
def test_a_malformed_reply_is_retried_or_dropped_and_counted(tmp_path, docs, llm, capsys, script, requests,
                                                              dropped):
    llm.script(*script)
    code = main(args(tmp_path, docs, llm, "n=1", "max_attempts=1", "parse_retries=1"))
    assert llm.count == requests and code == (1 if dropped else 0)
    if dropped:
        (reason,) = dropped
        assert f"dropped as {reason}" in capsys.readouterr().err and not (tmp_path / "eval.json").exists()
    else:
        assert len(json.loads((tmp_path / "eval.json").read_text())["samples"]) == 1


@pytest.mark.parametrize("step,reason,fix", [
    (Step(text="I would rather not answer in JSON today."), "malformed_reply", "use a model that follows"),
    (Step(size=50_000), "llm_error:LLMReplyTooLargeError", "lower llm.max_tokens"),
], ids=["not-json", "too-large"])
def test_every_reply_unusable_is_a_failure_naming_the_reason_and_fix(tmp_path, docs, llm, capsys, step, reason, fix):
    llm.rule = lambda body: step  # every request, generator and critic alike
    assert main(args(tmp_path, docs, llm, "n=3", "max_attempts=3", "parse_retries=0",
                     "llm.max_reply_chars=10000")) == 1
    err = capsys.readouterr().err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert f"3 of 3 tried were dropped as {reason}" in line and fix in line.split("fix: ", 1)[1]
    assert "raise max_attempts" not in line and "Traceback" not in err
    assert not (tmp_path / "eval.json").exists()


def test_the_critic_checks_an_unanswerable_question_against_the_whole_corpus(tmp_path, docs, llm):
    only = [f"types.{t}=0" for t in ("factual", "multi_hop", "comparison", "temporal")]
    data = generate(tmp_path, docs, llm, "n=1", "max_attempts=1", "types.unanswerable=1", "critic.related=2", *only)
    (item,) = data["samples"]
    assert not item["answerable"] and item["evidence"] == [] and item["reference_answer"] is None
    (gen,) = [r for r in llm.requests if r["model"] == "gen-model"]
    (crit,) = [r for r in llm.requests if r["model"] == "critic-model"]
    shown = lambda r: r["messages"][1]["content"].count("<passage id=")  # noqa: E731
    assert shown(gen) == 1 and shown(crit) == 3  # its own passage and the 2 best BM25 paragraphs


def test_concurrency_does_not_change_the_set(tmp_path, docs, llm):
    one = generate(tmp_path / "one", docs, llm, "n=5")["samples"]
    llm.reset()
    llm.delay_s = 0.05
    try:
        four = generate(tmp_path / "four", docs, llm, "n=5", "llm.max_concurrency=4")["samples"]
    finally:
        llm.delay_s = 0.0
    assert llm.max_in_flight > 1
    assert [s["id"] for s in one] == [s["id"] for s in four] and one == four  # decided in slot order


def test_failed_calls_are_counted_and_asked_again_by_the_next_run(tmp_path, docs, llm):
    llm.script(Step(status=500), Step(status=500))  # num_retries=1: both attempts of the first call
    data = generate(tmp_path, docs, llm, "n=3", "max_attempts=3")
    assert data["metadata"]["counts"]["dropped"] == {"llm_error:LLMServerError": 1}
    assert journal_path(tmp_path / "eval.json").exists()  # kept for the retry
    llm.reset()
    data = generate(tmp_path, docs, llm, "n=3", "max_attempts=3")
    assert llm.count == 2 and len(data["samples"]) == 3  # only the failed slot: generator + critic


def test_an_llm_embedder_deduplicates_through_the_embeddings_endpoint(tmp_path, docs, llm):
    data = generate(tmp_path, docs, llm, "n=14", "max_attempts=14", "dedup.method=embedder", "dedup.threshold=0.95",
                    "embedder=api", f"embedder.api_base={llm.url}", "embedder.model=openai/embed-model",
                    f"embedder.api_key_env={KEY}")
    assert data["metadata"]["counts"]["dropped"].get("near_duplicate", 0) >= 1
    assert any("input" in r for r in llm.requests)
    questions = [s["question"] for s in data["samples"]]
    assert len(questions) == len(set(questions))


@pytest.mark.parametrize("setup,extra,message", [
    (lambda d: None, [], "the corpus is empty"),
    (lambda d: (d / "a.txt").write_bytes(b"caf\xe9 au lait " * 20), [], "re-save the file as UTF-8"),
    (lambda d: (d / "scan.pdf").write_bytes(b"%PDF-1.4 not really"), [], "the corpus is empty"),
    ("docs", ["llm.api_key_env=RAGBENCH_NO_SUCH_KEY"], "export RAGBENCH_NO_SUCH_KEY=<your key>"),
    ("docs", ["critic.api_key_env=RAGBENCH_NO_SUCH_KEY"], "critic.api_key_env names"),
    ("docs", ["llm=extractive"], "is not an LLM"),
    ("docs", ["dataset=locomo"], "dataset=custom dataset.path="),
    ("docs", ["n_questions=3"], "generate --help"),
    ("docs", ["split=2"], "split=2.0 is not valid"),
    ("docs", ["critic.threshold=7"], "critic.threshold=7 is not valid"),
    ("docs", ["+types.trivia=1"], "types={"),
], ids=["empty-folder", "bad-encoding", "unreadable-pdf", "no-llm-key", "no-critic-key", "extractive",
        "not-custom", "unknown-key", "split", "threshold", "unknown-type"])
def test_bad_input_is_one_named_error(tmp_path, docs, llm, capsys, setup, extra, message):
    folder = docs
    if setup != "docs":
        folder = tmp_path / "mine"
        folder.mkdir()
        setup(folder)
    assert main(args(tmp_path, folder, llm, *extra)) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and message in err
    line = next(ln for ln in err.splitlines() if ln.startswith("error: "))
    assert "fix:" in err[err.index(line):]
    assert llm.count == 0  # nothing was asked


def test_a_provider_refusing_the_key_stops_the_run(tmp_path, docs, llm, capsys):
    llm.script(Step(status=401))
    assert main(args(tmp_path, docs, llm, "n=3")) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "fix: export a valid key" in err and "sk-test" not in err


def _subprocess(argv: list[str], cwd: Path, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), KEY: "sk-test"}
    return subprocess.Popen([sys.executable, "-m", "ragbench.datasets", *argv], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_a_killed_run_resumes_without_repeating_a_request(tmp_path, docs, llm):
    argv = args(tmp_path, docs, llm, "n=6")
    llm.script(*[Step()] * 5, Step(delay_s=30))  # the 6th request stalls: the run is killed waiting for it
    proc = _subprocess(argv, tmp_path)
    deadline = time.time() + 120
    while llm.count < 6 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert llm.count == 6, proc.stderr.read() if proc.poll() is not None else "timed out"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    answered = {json.dumps(r, sort_keys=True) for r in llm.requests[:5]}
    journal = journal_path(tmp_path / "eval.json").read_text().splitlines()
    assert len(journal) == 3  # the header and the two finished slots (the third waits on its critic)
    llm.reset()
    proc = _subprocess(argv, tmp_path)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    again = [json.dumps(r, sort_keys=True) for r in llm.requests]
    assert again and not answered & set(again)  # nothing that was answered is asked again
    resumed = json.loads((tmp_path / "eval.json").read_text())["samples"]
    # the same set as one uninterrupted run (fresh output and cache)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    llm.reset()
    straight = generate(fresh, docs, llm, "n=6")["samples"]
    assert [(s["id"], s["question"]) for s in resumed] == [(s["id"], s["question"]) for s in straight]


@pytest.mark.slow
def test_the_generated_set_sweeps_end_to_end(tmp_path, docs, llm):
    samples = generate(tmp_path, docs, llm, "n=6", "dedup.method=embedder")["samples"]  # the default: minilm
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "ragbench", "-m", "dataset=custom", f"dataset.path={docs}",
         f"dataset.qa_file={tmp_path / 'eval.json'}", "retrieval=dense,bm25", f"cache.dir={tmp_path}/stage"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    exp = client.get_experiment_by_name("ragbench")
    jobs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("ragbench.role") == "job"]
    targets = sorted(r.data.params["retrieval.retriever._target_"].rsplit(".", 1)[-1] for r in jobs)
    assert targets == ["BM25Retriever", "FaissRetriever"]
    for r in jobs:
        assert r.info.status == "FINISHED"
        assert r.data.metrics["cases/total"] == len(samples)
        assert r.data.metrics["evidence/unmatched"] == 0
        assert r.data.metrics["retrieval/hit_at_5"] > 0
