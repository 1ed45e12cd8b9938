"""compare reads a run's ``cases.jsonl`` through ``CaseRecord.from_json``: a line of 100,000 nested brackets
is one line ("nested too deep", exit 2), never a RecursionError; a damaged line names the run, the line
and the field; a line of the layout before the case record still compares. The store is a stand-in
client holding the run's files (no MLflow)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from ragbench.compare import select
from ragbench.compare.cli import main
from ragbench.errors import ConfigError
from tests.unit.compare.synth import rows

RUN = "0123456789abcdef0123456789abcdef"


class Client:
    """What ``select.load_cases`` asks of an MlflowClient: a run's artifact names and files."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def list_artifacts(self, run_id: str) -> list[SimpleNamespace]:
        return [SimpleNamespace(path=name) for name in self.files]

    def download_artifacts(self, run_id: str, path: str, dst_path: str) -> str:
        target = Path(dst_path) / path
        target.write_text(self.files[path], encoding="utf-8")
        return str(target)


def _run(run_id: str = RUN) -> SimpleNamespace:
    return SimpleNamespace(info=SimpleNamespace(run_id=run_id, run_name="retrieval=bm25 #0", status="FINISHED",
                                                start_time=0),
                           data=SimpleNamespace(tags={}, params={"retrieval.topk": "5"}, metrics={}))


def _lines(data: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in data)


def _old_rows() -> list[dict]:
    """Table rows as jobs wrote them before the case record (no record_version), with the columns they had."""
    return [{**r, "question": "q?", "gold": "g", "answer": "a", "error_type": None, "error": None,
             "retrieved_scores": [0.5, 0.4], "citations": [], "prompt_tokens": 3, "completion_tokens": 1}
            for r in rows([0.5, 1.0, 0.0])]


DEEP = '{"qid": "q1", "x": ' + "[" * 100_000 + "}"


def test_a_line_nested_too_deep_is_one_line_not_a_recursion_error():
    lines = _lines(_old_rows()).splitlines()
    lines[1] = DEEP
    with pytest.raises(ConfigError) as err:
        select.load_cases(Client({"cases.jsonl": "\n".join(lines) + "\n"}), _run())
    message = str(err.value)
    assert message.startswith(f"run {RUN}: cases.jsonl line 2 is nested too deep (more than 100 levels")
    assert "fix: " in message and "\n" not in message


def test_compare_says_nested_too_deep_in_one_line(monkeypatch, capsys, tmp_path):
    client = Client({"cases.jsonl": _lines(_old_rows()[:1]) + DEEP + "\n"})
    monkeypatch.setattr(select, "open_store", lambda uri: client)
    monkeypatch.setattr(select, "find_runs", lambda client, uri, experiment, **kw: ([_run(), _run("f" * 32)], []))
    code = main(["--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db", "--runs", RUN, "f" * 32])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "cases.jsonl line 2 is nested too deep" in err


def test_a_mistyped_field_names_the_line_and_the_field():
    data = _old_rows()
    data[2]["answerable"] = "yes"
    with pytest.raises(ConfigError, match=r"cases.jsonl line 3 \(case q2\): 'answerable' is a string, expected "
                                          r"true/false; fix: "):
        select.load_cases(Client({"cases.jsonl": _lines(data)}), _run())


def test_a_line_from_before_the_case_record_still_compares():
    run = select.load_cases(Client({"cases.jsonl": _lines(_old_rows())}), _run())
    assert run.qids == ("q0", "q1", "q2") and list(run.fields["answer/f1"]) == [0.5, 1.0, 0.0]
    assert run.rows[0]["context_parts"] == [[]]  # migrated: the whole context chunk


def test_a_baseline_file_nested_too_deep_is_one_line(tmp_path):
    from ragbench.compare.runcases import load_baseline

    path = tmp_path / "baseline.json"
    path.write_text(DEEP)
    with pytest.raises(ConfigError, match="not readable JSON .nested too deep"):
        load_baseline(path)
