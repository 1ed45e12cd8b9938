"""``ragbench.jsonio.loads_bounded``: JSON nested deeper than the bound is one ``NestedTooDeep`` naming
where (a ``json.JSONDecodeError`` and a ``RagbenchError``), never a ``RecursionError``; brackets inside
strings do not nest; everything else parses as ``json.loads`` does. ``RunRecord.from_json`` reads with it."""

from __future__ import annotations

import json
import pickle

import pytest

from ragbench.errors import RagbenchError
from ragbench.jsonio import MAX_DEPTH, NestedTooDeep, loads_bounded, nesting_problem
from ragbench.record import RunRecord


@pytest.mark.parametrize("text", ["[" * 100_000, "[" * 100_000 + "]" * 100_000, '{"a":' * 100_000,
                                  b"[" * 100_000, '[{"x": ' * 60 + "1" + "}]" * 60])
def test_deep_nesting_is_one_named_error_not_a_recursion_error(text: str | bytes) -> None:
    with pytest.raises(NestedTooDeep) as err:
        loads_bounded(text, where="cases.jsonl line 3")
    exc = err.value
    assert isinstance(exc, json.JSONDecodeError) and isinstance(exc, RagbenchError)
    assert str(exc).startswith("cases.jsonl line 3: nested too deep (more than 100 levels")
    assert "fix: " in str(exc) and "\n" not in str(exc)
    assert exc.colno > MAX_DEPTH  # the column of the bracket that went past the bound


def test_brackets_inside_strings_and_escapes_do_not_nest() -> None:
    value = {"text": "[" * 5000 + '"\\' + "{" * 5000, "list": [[["ok"]]], "quote": 'a \\" ['}
    assert loads_bounded(json.dumps(value)) == value
    assert nesting_problem(json.dumps(value)) is None
    shallow = "[" * MAX_DEPTH + "]" * MAX_DEPTH  # exactly the bound: read
    assert loads_bounded(shallow) == json.loads(shallow)
    assert nesting_problem("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)) == MAX_DEPTH
    # an escaped backslash, then the string's end
    assert loads_bounded('["a\\\\", [[1]]]', max_depth=3) == ["a\\", [[1]]]
    with pytest.raises(NestedTooDeep):
        loads_bounded('["a\\\\", [[[1]]]]', max_depth=3)


def test_other_faults_are_json_loads_own() -> None:
    with pytest.raises(json.JSONDecodeError) as err:
        loads_bounded("{'qid': 1}")
    assert not isinstance(err.value, NestedTooDeep)
    assert loads_bounded(b'{"a": [1, 2]}') == {"a": [1, 2]}


def test_the_error_survives_pickling() -> None:
    exc = NestedTooDeep("reply", 3, "[[[[", 3)
    again = pickle.loads(pickle.dumps(exc))
    assert str(again) == str(exc) and again.colno == 4


def test_a_deeply_nested_run_json_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="run.json is nested too deep"):
        RunRecord.from_json('{"format": "ragbench-run/2", "config": ' + "[" * 100_000 + "}")
