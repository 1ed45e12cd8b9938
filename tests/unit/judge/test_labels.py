"""Labels files: the bundled sample loads; every bad input is one LabelsError line naming file, line and fix."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ragbench.errors import ConfigError
from ragbench.judge.labels import LabelsError, load_labels, sample_path

GOOD = {"question": "Q?", "answer": "A.", "contexts": ["p1", {"title": "t", "text": "p2"}],
        "labels": {"faithfulness": 1}}


def _write(tmp_path, lines):
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_bundled_sample_loads():
    labels = load_labels(sample_path())
    assert len(labels.items) == 80
    assert labels.rubrics == ("faithfulness",)
    assert Counter(i.labels["faithfulness"] for i in labels.items) == {0: 40, 1: 40}
    assert all(i.contexts and i.question and i.answer and i.generator for i in labels.items)
    assert len({i.item_id for i in labels.items}) == 80
    assert (sample_path().parent / "SOURCE.md").is_file()


def test_a_good_line_and_its_defaults(tmp_path):
    labels = load_labels(_write(tmp_path, [GOOD, {**GOOD, "gold": "g", "question_type": "multi_hop"}]))
    first, second = labels.items
    assert first.item_id == "line-1" and first.question_type == "unknown" and first.gold == ()
    assert (first.line, second.line) == (1, 2)
    written = {**GOOD, "id": "x", "gold": "g", "question_type": "multi_hop"}
    second = load_labels(_write(tmp_path, [written])).items[0]
    assert first.contexts == (("", "p1"), ("t", "p2"))
    assert second.item_id == "x" and second.gold == ("g",) and second.question_type == "multi_hop"
    ctx = first.context_objects([1, 0])
    assert [c.text for c in ctx] == ["p2", "p1"]
    assert first.query().text == "Q?" and first.answer_object("B").text == "B"
    assert len(labels.sha256) == 64


@pytest.mark.parametrize(("lines", "line", "words"), [
    (["{not json"], 1, "not JSON"),
    ([GOOD, "[1, 2]"], 2, "expected a JSON object"),
    ([{**GOOD, "question": ""}], 1, "'question' must be a non-empty string"),
    ([{k: v for k, v in GOOD.items() if k != "answer"}], 1, "'answer' must be a non-empty string"),
    ([{**GOOD, "contexts": "p1"}], 1, "'contexts' must be a list"),
    ([{**GOOD, "contexts": [{"title": "t"}]}], 1, "contexts[1] must be"),
    ([{**GOOD, "labels": {}}], 1, "'labels' must map"),
    ([{**GOOD, "labels": {"faithfulness": "yes"}}], 1, "labels.faithfulness must be an integer"),
    ([{**GOOD, "labels": {"faithfulness": True}}], 1, "labels.faithfulness must be an integer"),
    ([{**GOOD, "gold": [1]}], 1, "'gold' must be a string or a list of strings"),
    ([{**GOOD, "answerable": "no"}], 1, "'answerable' must be true or false"),
    ([{**GOOD, "lables": {}}], 1, "unknown field 'lables'"),
    ([{**GOOD, "id": "a"}, {**GOOD, "id": "a"}], 2, "id 'a' also on line 1"),
    ([{**GOOD, "id": 7}, {**GOOD, "id": "7"}], 2, "id '7' also on line 1"),
    ([{**GOOD, "id": ["a"]}], 1, "'id' must be a string or an integer"),
    # the old pattern: a generated line-<n> equal to an id written on another line was reported as a repeat
    ([{**GOOD, "id": "line-3"}, {**GOOD, "id": "b"}, GOOD], 3,
     "no 'id' here, while 2 of the 3 lines give one (first: line 1); a generated id (line-<n>) could equal"),
])
def test_bad_lines_are_one_line_naming_the_line(tmp_path, lines, line, words):
    path = _write(tmp_path, lines)
    with pytest.raises(LabelsError) as err:
        load_labels(path)
    message = str(err.value)
    assert f"labels file {path}, line {line}: " in message and words in message and "fix:" in message
    assert "\n" not in message
    assert isinstance(err.value, ConfigError)


def test_missing_empty_and_binary_files(tmp_path):
    with pytest.raises(LabelsError, match="does not exist; fix: give the path"):
        load_labels(tmp_path / "nope.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(LabelsError, match="holds no item"):
        load_labels(empty)
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe{}")
    with pytest.raises(LabelsError, match="not UTF-8"):
        load_labels(binary)


@pytest.mark.parametrize(("scale", "label", "allowed"), [
    ("binary", 5, "0 or 1"), ("binary", -1, "0 or 1"), ("rubric", 5, "0 to 4"), ("rubric", -1, "0 to 4"),
])
def test_a_label_off_the_scale_is_one_line_naming_file_line_and_values(tmp_path, scale, label, allowed):
    path = _write(tmp_path, [GOOD, {**GOOD, "labels": {"faithfulness": 1, "correctness": label}}])
    labels = load_labels(path)
    with pytest.raises(LabelsError) as err:
        labels.check_scale(scale, 4)
    message = str(err.value)
    assert message.startswith(f"labels file {path}, line 2: labels.correctness is {label}, but scale={scale} "
                              f"allows {allowed}; fix: correct the label")
    assert "\n" not in message


def test_labels_on_the_scale_pass():
    labels = load_labels(sample_path())
    labels.check_scale("binary", 4)
    labels.check_scale("rubric", 1)
