"""A real job on a custom dataset with ``tags``, ``citation_required``, multiple-choice ``options`` and an answer
post-processing hook (``+dataset.postprocess``), answered by the loopback server: the processed answer is
scored, ``answer/raw_*`` keep the unprocessed one's scores, citation support and missing citations are logged,
by_tag/* splits on the tags, ``python -m ragbench.verify`` passes and catches an edited score."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ragbench.verify import main as verify
from tests.fixtures.jobs import run_job
from tests.fixtures.llm_server import LLMServer, default_reply

pytestmark = pytest.mark.slow
KEY_ENV = "RAGBENCH_CASE_FIELDS_KEY"
DOC = ("# Ferry handbook\n\nThe ferry leaves Pier 4 at 9 am every weekday.\n\n"
       "## Finances\n\nThe ferry company's annual revenue was 1234.5 million euros in 2023.\n")
ROWS = [
    {"id": "rev", "question": "What was the annual revenue in millions?", "answers": ["1234.5"],
     "tags": ["finance", "numbers"], "citation_required": True, "evidence": ["annual revenue was 1234.5 million"]},
    {"id": "pier", "question": "Which pier does the ferry leave from?", "answers": ["Pier 4"],
     "options": ["Pier 2", "Pier 4"], "tags": ["travel"], "citation_required": True,
     "evidence": ["The ferry leaves Pier 4 at 9 am"]},
    {"id": "time", "question": "At what time does the ferry leave?", "answers": ["9 am"], "tags": ["travel"],
     "evidence": ["The ferry leaves Pier 4 at 9 am"]},
]


def reply(body: dict) -> str:
    """The revenue as a formatted figure with its citation; the pier as an option letter without one; else the
    fixture's default (the start of ref_1, cited)."""
    question = re.search(r"Question: (.*)", body["messages"][-1]["content"])
    asked = question.group(1) if question else ""
    if "revenue" in asked:
        return "The annual revenue was $1,234.5 million. [ref_1] The ferry sails to the moon [ref_1]."
    if "pier" in asked:
        return "B"
    return default_reply(body)


def test_tags_citations_and_postprocess_in_a_job(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, "not-a-secret")
    root = tmp_path / "kb"
    root.mkdir()
    (root / "ferry.md").write_text(DOC, encoding="utf-8")
    (root / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    hook = ("+dataset.postprocess={_target_:ragbench.datasets.postprocess.Chain,steps:["
            "{_target_:ragbench.datasets.postprocess.MultipleChoice},"
            "{_target_:ragbench.datasets.postprocess.NumberNormalizer}]}")
    with LLMServer(responder=reply) as server:
        run, client = run_job([
            "dataset=custom", f"dataset.path={root}", hook, "retrieval=bm25", f"cache.dir={tmp_path}/cache",
            "llm=openai_compatible", "llm.model=openai/gen-model", f"llm.api_base={server.url}",
            f"llm.api_key_env={KEY_ENV}", "judge=lexical",
        ], tmp_path)
    m = run.data.metrics
    rows = {r["qid"]: r for r in map(json.loads, Path(client.download_artifacts(
        run.info.run_id, "cases.jsonl")).read_text().splitlines())}
    rev, pier, time = rows["rev"], rows["pier"], rows["time"]
    # the record keeps both answers; the processed one is scored
    assert rev["answer_raw"] == "The annual revenue was $1,234.5 million. The ferry sails to the moon." == \
        rev["answer"].replace("1234.5.", "$1,234.5 million.")
    assert rev["answer"] == "The annual revenue was 1234.5. The ferry sails to the moon."
    assert pier["answer_raw"] == "B" and pier["answer"] == "Pier 4"
    assert pier["answer/em"] == 1.0 and pier["answer/raw_em"] == 0.0
    assert rev["answer/contains"] == 1.0 and rev["answer/raw_f1"] < rev["answer/f1"]
    # cited sentences: the revenue one is supported by ref_1, the moon one is not -> 1/2
    assert rev["cited"] == [["The annual revenue was $1,234.5 million.", [1]], ["The ferry sails to the moon.", [1]]]
    assert rev["answer/citation_support_rate"] == 0.5
    assert rev["answer/citation_missing"] == 0.0 and pier["answer/citation_missing"] == 1.0
    assert "answer/citation_missing" not in time  # not citation_required
    assert pier["query_meta"]["tags"] == ["travel"] and rev["query_meta"]["citation_required"] is True
    assert m["answer/citation_missing"] == 0.5
    assert m["by_tag/travel/answer/em"] == (1.0 + time["answer/em"]) / 2
    assert m["by_tag/finance/answer/citation_support_rate"] == 0.5 and "by_tag/numbers/answer/f1" in m
    assert m["answer/raw_em"] == (rev["answer/raw_em"] + 0.0 + time["answer/raw_em"]) / 3

    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    assert verify([run.info.run_id, "--tracking-uri", uri]) == 0
    assert "OK: every metric matches" in capsys.readouterr().out
    cases = next(p for p in tmp_path.rglob("cases.jsonl") if run.info.run_id in str(p) and "artifacts" in p.parts)
    original = cases.read_text()
    for key, value in (("answer/raw_em", 1.0), ("answer/citation_support_rate", 1.0)):
        edited = []
        for line in original.splitlines():
            row = json.loads(line)
            if row["qid"] == ("pier" if key == "answer/raw_em" else "rev"):
                row[key] = value
            edited.append(json.dumps(row))
        cases.write_text("\n".join(edited) + "\n")
        assert verify([run.info.run_id, "--tracking-uri", uri]) == 1
        assert key in capsys.readouterr().out
    cases.write_text(original)
    assert verify([run.info.run_id, "--tracking-uri", uri]) == 0
