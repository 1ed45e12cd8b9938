"""``python -m ragbench.export`` on a toy run's case artifacts (the store replaced by their bytes, as in
tests/unit/tracking/test_verify_input.py): each exported record names its run and top-k, and
``system=responses`` reads that top-k back (no ``retrieval.topk`` to pass); question ids with spaces
export as responses; an output path that cannot be written and a damaged record are one line each
(exit 2 and 1), never a traceback."""

from __future__ import annotations

import json

import pytest

from ragbench import verify
from ragbench.exported import KEY, exported_topk
from ragbench.judge.lexical import LexicalJudge
from ragbench.pipeline import Pipeline
from ragbench.record import case_record
from ragbench.retrieval.bm25 import BM25Retriever
from tests.fixtures.toy import toy_components

RUN = "fedcba9876543210fedcba9876543210"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    comps = toy_components(retriever=BM25Retriever(), judges={"lexical": LexicalJudge(dataset="toy")})
    result = Pipeline(comps).run()
    return [json.loads(json.dumps(case_record(c, result.tree, result.evidence.get(c.query.qid), dataset="toy",
                                              topk=2).row(), default=str)) for c in result.cases]


def _store(monkeypatch: pytest.MonkeyPatch, rows: list[dict], cases: bytes | None = None) -> None:
    data = cases if cases is not None else "".join(json.dumps(r) + "\n" for r in rows).encode()
    art = verify.RunArtifacts(run_id=RUN, cases=data, scores=None, metrics={}, topk=2)
    monkeypatch.setattr(verify, "fetch_run", lambda run_id, uri: art)


def _export(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from ragbench.export import main

    code = main([RUN, *args, "--tracking-uri", "sqlite:///unused.db"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_records_carry_the_run_and_its_topk_which_the_read_back_resolves(monkeypatch, capsys, rows, tmp_path):
    _store(monkeypatch, rows)
    out = tmp_path / "out.jsonl"
    code, stdout, _ = _export(capsys, "--responses", str(out))
    assert code == 0 and "read back: system=responses system.path=" in stdout
    assert all(len(line) <= 80 for line in stdout.splitlines() if str(out) not in line)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records and all(r["metadata"] == {KEY: {"run_id": RUN, "topk": 2}} for r in records)
    assert exported_topk(str(out), 5) == 2
    assert exported_topk(str(tmp_path / "missing.jsonl"), 5) == 5
    (tmp_path / "other.jsonl").write_text('\n{"qid": "q1", "answer": "", "contexts": []}\n')
    assert exported_topk(str(tmp_path / "other.jsonl"), 5) == 5  # not an export: the default
    (tmp_path / "deep.jsonl").write_text("[" * 100_000 + "\n")
    assert exported_topk(str(tmp_path / "deep.jsonl"), 5) == 5


def test_the_read_back_config_takes_the_files_topk_unless_one_is_given(monkeypatch, capsys, rows, tmp_path):
    from tests.fixtures.jobs import compose_cfg

    _store(monkeypatch, rows)
    out = tmp_path / "out.jsonl"
    assert _export(capsys, "--responses", str(out))[0] == 0
    read_back = ["dataset=qasper", "system=responses", f"system.path={out}", "expander=parent"]
    assert compose_cfg(read_back, tmp_path).retrieval.topk == 2
    assert compose_cfg([*read_back, "retrieval.topk=7"], tmp_path).retrieval.topk == 7
    assert compose_cfg(["dataset=qasper", "system=python", "system.target=examples.my_rag:answer"],
                       tmp_path).retrieval.topk == 5


def test_ids_with_spaces_export_as_responses_and_are_named_for_trec(monkeypatch, capsys, rows, tmp_path):
    spaced = [{**r, "qid": r["qid"].replace("q", "question ")} for r in rows]
    _store(monkeypatch, spaced)
    out = tmp_path / "out.jsonl"
    code, _, err = _export(capsys, "--responses", str(out))
    assert code == 0, err
    assert [json.loads(line)["qid"] for line in out.read_text().splitlines()][:1] == ["question 1"]
    code, _, err = _export(capsys, "--trec", str(tmp_path / "run.txt"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "an id holds whitespace" in err and "fix: export --responses" in err


@pytest.mark.parametrize("flag", ["--responses", "--trec", "--qrels"])
@pytest.mark.parametrize("where", ["missing/out.txt", "."], ids=["no-folder", "a-folder"])
def test_an_output_path_that_cannot_be_written_is_one_line(monkeypatch, capsys, rows, tmp_path, flag, where):
    _store(monkeypatch, rows)
    target = str(tmp_path / where)
    code, _, err = _export(capsys, flag, target)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"ragbench.export: cannot write {target}" in err and "fix: " in err


def _cut(data: bytes) -> bytes:
    return data[:-9]


@pytest.mark.parametrize(("change", "flag", "phrase"), [
    (lambda rows: None, "--responses", "cases.jsonl line 3 is cut off mid-line"),
    (lambda rows: rows[0].__setitem__("prompt_tokens", "many"), "--responses",
     "(case q1): 'prompt_tokens' is a string, expected a number"),  # the case-line reader refuses it
    (lambda rows: rows[1]["qrels"].__setitem__("chunk", ["a"]), "--qrels", "AttributeError"),
], ids=["cut-mid-line", "tokens-not-a-number", "qrels-a-list"])
def test_a_damaged_record_is_one_line_and_writes_nothing(monkeypatch, capsys, rows, tmp_path, change, flag,
                                                         phrase):
    damaged = json.loads(json.dumps(rows))
    change(damaged)
    data = "".join(json.dumps(r) + "\n" for r in damaged).encode()
    _store(monkeypatch, damaged, _cut(data) if "cut" in phrase else data)
    target = tmp_path / "out.txt"
    code, _, err = _export(capsys, flag, str(target))
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("ragbench.export: FAILED: ") and phrase in err and "fix: " in err
    assert not target.exists()
