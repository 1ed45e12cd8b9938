"""Where ``dataset.qa_file`` is read (docs/own-data.md): a relative path below ``dataset.path``, not below
``dataset.docs_dir`` nor the current folder; an absolute or ``~`` path as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragbench.datasets.custom import CustomAdapter
from ragbench.errors import DatasetError

QA = json.dumps({"question": "When does the ferry leave?", "answers": ["7:15"]}) + "\n"


def _docs(root: Path) -> Path:
    (root / "docs").mkdir(parents=True)
    text = "# Ferry\n\nThe ferry leaves the north pier at 7:15.\n"
    (root / "docs" / "ferry.md").write_text(text, encoding="utf-8")
    return root


def _questions(root: Path, **kwargs) -> list[str]:
    return [q.text for q in CustomAdapter(name="custom", path=str(root), **kwargs).load().queries]


def test_a_relative_qa_file_is_read_below_dataset_path_not_docs_dir(tmp_path):
    root = _docs(tmp_path / "set")
    (root / "sub").mkdir()
    (root / "sub" / "eval.jsonl").write_text(QA, encoding="utf-8")
    assert _questions(root, docs_dir="docs", qa_file="sub/eval.jsonl") == ["When does the ferry leave?"]


def test_a_qa_file_only_in_the_current_folder_names_the_absolute_path_to_give(tmp_path, monkeypatch):
    root = _docs(tmp_path / "set")
    work = tmp_path / "work"
    work.mkdir()
    (work / "eval.jsonl").write_text(QA, encoding="utf-8")
    monkeypatch.chdir(work)  # `datasets generate ... out=eval.jsonl` wrote it here
    with pytest.raises(DatasetError) as err:
        _questions(root, qa_file="eval.jsonl")
    text = str(err.value)
    assert "not found below dataset.path" in text and str(root / "eval.jsonl") in text
    assert f"dataset.qa_file={work / 'eval.jsonl'}" in text
    absolute = str(work / "eval.jsonl")  # read as it is
    assert _questions(root, qa_file=absolute) == ["When does the ferry leave?"]


def test_a_home_relative_qa_file_is_expanded(tmp_path, monkeypatch):
    root = _docs(tmp_path / "set")
    home = tmp_path / "home"
    home.mkdir()
    (home / "eval.jsonl").write_text(QA, encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    assert _questions(root, qa_file="~/eval.jsonl") == ["When does the ferry leave?"]
