"""The custom format's ``tags``, ``citation_required`` and ``options`` (one named error for a wrong type), and
the answer post-processing hooks (``dataset.postprocess``): numbers, multiple choice, chains."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra.utils import instantiate

from ragbench.datasets.custom import CustomAdapter
from ragbench.datasets.postprocess import Chain, MultipleChoice, NumberNormalizer
from ragbench.errors import ConfigError, DatasetError
from ragbench.protocols import AnswerPostprocessor
from ragbench.types import Query

DOC = "# Ferry\n\nThe ferry leaves Pier 4 at 9 am. Revenue was 1234.5 million euros.\n"


def _root(tmp_path: Path, rows: list[dict]) -> Path:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "ferry.md").write_text(DOC, encoding="utf-8")
    (root / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root


def test_tags_citation_required_and_options_reach_the_query_meta(tmp_path):
    rows = [{"question": "Where does the ferry leave?", "answers": ["Pier 4"], "tags": ["travel", " piers "],
             "citation_required": True, "options": ["Pier 2", "Pier 4"]},
            {"question": "When?", "answers": ["9 am"]}]
    qs = CustomAdapter(name="custom", path=str(_root(tmp_path, rows))).load().queries
    assert qs[0].meta == {"tags": ("travel", "piers"), "citation_required": True, "options": ("Pier 2", "Pier 4")}
    assert qs[1].meta == {}


def test_a_conversation_turn_takes_labels_as_a_list_and_marks_as_an_object(tmp_path):
    rows = [{"id": "c1", "turns": [{"question": "Where?", "answers": ["Pier 4"], "tags": ["travel"],
                                    "citation_required": True},
                                   {"question": "When?", "answers": ["9 am"], "tags": {"followup": "yes"}}]}]
    qs = CustomAdapter(name="custom", path=str(_root(tmp_path, rows))).load().queries
    assert qs[0].meta == {"tags": ("travel",), "citation_required": True} and qs[1].meta == {"followup": "yes"}


@pytest.mark.parametrize(("field", "value"), [("tags", "travel"), ("tags", ["ok", 3]), ("tags", [""]),
                                              ("citation_required", "yes"), ("citation_required", 1),
                                              ("options", {"A": "x"})])
def test_a_wrong_type_is_one_error_naming_file_line_and_field(tmp_path, field, value):
    rows = [{"question": "When?", "answers": ["9 am"]}, {"question": "Where?", "answers": ["Pier 4"], field: value}]
    root = _root(tmp_path, rows)
    with pytest.raises(DatasetError) as err:
        CustomAdapter(name="custom", path=str(root)).load()
    text = str(err.value).splitlines()[0]  # the error line (its fix follows)
    assert str(root / "qa.jsonl") in text and "record line 2" in text and f"field '{field}'" in text


Q = Query(qid="q", text="Where?", answers=("Pier 4",), question_type="t", meta={"options": ("Pier 2", "Pier 4")})


@pytest.mark.parametrize(("text", "want"), [
    ("The revenue was $1,234.50 million.", "The revenue was 1234.5."),
    ("$ 1,234.5 million", "1234.5"),
    ("In 2023, margins were 12%.", "In 2023, margins were 12."),
    ("3.0 bn and v1.2", "3 and v1.2"),
    ("no numbers", "no numbers"),
])
def test_number_normalizer(text, want):
    assert NumberNormalizer().process(text, Q) == want


@pytest.mark.parametrize(("text", "to_text", "to_letter"), [
    ("B", "Pier 4", "B"), ("(b)", "Pier 4", "B"), ("Answer: B.", "Pier 4", "B"), ("The answer is A", "Pier 2", "A"),
    ("Pier 4", "Pier 4", "B"), ("Both piers", "Both piers", "Both piers"), ("C", "C", "C"),
])
def test_multiple_choice_both_ways(text, to_text, to_letter):
    assert MultipleChoice().process(text, Q) == to_text
    assert MultipleChoice(to="letter").process(text, Q) == to_letter


def test_multiple_choice_leaves_a_question_without_options_alone():
    assert MultipleChoice().process("B", Query(qid="q", text="x", answers=("y",), question_type="t")) == "B"


def test_hooks_by_target_chain_and_bad_config(tmp_path):
    node = {"_target_": "ragbench.datasets.postprocess.Chain", "steps": [
        {"_target_": "ragbench.datasets.postprocess.MultipleChoice"},
        {"_target_": "ragbench.datasets.postprocess.NumberNormalizer"}]}
    chain = instantiate(node)
    assert isinstance(chain, Chain) and isinstance(chain, AnswerPostprocessor)
    assert chain.process("A", Query(qid="q", text="x", answers=(), question_type="t",
                                    meta={"options": ("$1,000", "2")})) == "1000"
    adapter = CustomAdapter(name="custom", path=str(_root(tmp_path, [{"question": "q", "answers": ["a"]}])),
                            postprocess=NumberNormalizer())
    assert adapter.postprocess == NumberNormalizer()
    with pytest.raises(ConfigError, match="not an answer post-processor"):
        CustomAdapter(name="custom", path=str(tmp_path), postprocess="numbers")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="choose text or letter"):
        MultipleChoice(to="number")


@pytest.mark.parametrize("option,hook", [("number", NumberNormalizer), ("multiple_choice", MultipleChoice)])
def test_the_postprocess_group_puts_its_hook_on_the_dataset(option, hook):
    from hydra import compose, initialize_config_module

    with initialize_config_module(version_base=None, config_module="ragbench.conf"):
        cfg = compose("config", overrides=[f"postprocess={option}", "dataset=financebench"])
        assert "postprocess" not in compose("config").dataset  # postprocess=none: the answer as generated
    assert isinstance(instantiate(cfg.dataset).postprocess, hook)
