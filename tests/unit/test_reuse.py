"""ragbench.reuse: a job's dataset, chunks and evidence reused by the next job only when recomputing them
would give the same value."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from ragbench.reuse import LAST, LastValues, file_signature


def _counting(values: LastValues, kind: str, key: object, inputs: tuple, calls: list[int], **kw: object) -> object:
    def compute() -> object:
        calls.append(1)
        return object()
    return values.get(kind, key, inputs, compute, **kw)  # type: ignore[arg-type]


def test_reused_only_for_an_equal_key_and_the_same_input_objects() -> None:
    values, calls = LastValues(), []
    docs = ("a", "b")
    first = _counting(values, "chunks", "k", (docs,), calls)
    assert _counting(values, "chunks", "k", (docs,), calls) is first  # same key, same object: reused
    assert len(calls) == 1 and values.reused == {"chunks": 1}
    cases = [
        ("another key", "k2", (docs,)),
        ("an equal but different object", "k", (tuple(["a", "b"]),)),
        ("fewer inputs", "k", ()),
    ]
    for why, key, inputs in cases:
        before = len(calls)
        _counting(values, "chunks", key, inputs, calls)
        assert len(calls) == before + 1, why


def test_one_value_per_kind_and_kinds_apart() -> None:
    values, calls = LastValues(), []
    a = _counting(values, "chunks", "k", (), calls)
    _counting(values, "evidence", "k", (), calls)  # another kind: its own entry
    assert _counting(values, "chunks", "k", (), calls) is a
    _counting(values, "chunks", "other", (), calls)  # replaces the last chunks value
    _counting(values, "chunks", "k", (), calls)
    assert len(calls) == 4


def test_signature_change_recomputes_and_a_vanished_file_is_never_equal(tmp_path: Path) -> None:
    f = tmp_path / "qa.json"
    f.write_text("[1]")
    values, calls = LastValues(), []

    def get() -> object:
        return _counting(values, "dataset", "k", (), calls, signature=lambda _v: file_signature(tmp_path, ["qa.json"]))

    get()
    get()
    assert len(calls) == 1
    f.write_text("[2]")  # same size, written within the same timestamp tick: the content hash still differs
    get()
    assert len(calls) == 2
    (tmp_path / "extra.json").write_text("{}")  # a file added to the folder the adapter read from
    get()
    assert len(calls) == 3
    f.unlink()
    get()
    assert len(calls) == 4


def test_log_lines_of_the_computation_are_emitted_again_on_reuse(caplog: pytest.LogCaptureFixture) -> None:
    values = LastValues()

    def compute() -> int:
        logging.getLogger("ragbench.datasets.x").warning("x: 3 evidence entries hold no parseable dia_id")
        return 1

    with caplog.at_level(logging.INFO):
        values.get("dataset", "k", (), compute)
        values.get("dataset", "k", (), compute)
    lines = [r.getMessage() for r in caplog.records if r.name == "ragbench.datasets.x"]
    assert lines == ["x: 3 evidence entries hold no parseable dia_id"] * 2


def test_dataset_load_reuses_the_read_set_until_a_file_changes(tmp_path: Path) -> None:
    from ragbench.datasets.base import bundled_sample
    from ragbench.datasets.locomo import LocomoAdapter

    root = tmp_path / "locomo"
    shutil.copytree(bundled_sample("locomo"), root)
    LAST.clear()
    first = LocomoAdapter(name="locomo", path=str(root)).load()
    again = LocomoAdapter(name="locomo", path=str(root)).load()
    assert again is first and LAST.reused.get("dataset") == 1
    other = LocomoAdapter(name="locomo", path=str(root), sample_size=5).load()  # another configuration
    assert other is not first and len(other.queries) == 5
    qa = next(p for p in root.rglob("*.json"))
    qa.write_text(qa.read_text().replace("Caroline", "Carolina", 1))
    edited = LocomoAdapter(name="locomo", path=str(root)).load()
    assert edited is not first and edited.fingerprint != first.fingerprint
    LAST.clear()


def test_the_old_value_is_released_before_a_new_one_is_computed() -> None:
    import weakref

    values = LastValues()

    class Big:
        pass

    old = values.get("dataset", "a", (), Big)
    ref = weakref.ref(old)
    del old
    seen: list[object] = []
    values.get("dataset", "b", (), lambda: seen.append(ref()) or Big())
    assert seen == [None]  # while "b" loaded, "a" was no longer held: one job's data in memory, not two


def test_a_miss_also_drops_the_kinds_computed_after_it() -> None:
    values, calls = LastValues(), []
    docs = ("d",)
    _counting(values, "dataset", "a", (), calls)
    _counting(values, "chunks", "c", (docs,), calls)
    _counting(values, "evidence", "e", (docs,), calls)
    _counting(values, "chunks", "c2", (docs,), calls)  # a chunks miss: the evidence entry goes too
    _counting(values, "dataset", "a", (), calls)  # the dataset entry stays
    _counting(values, "evidence", "e", (docs,), calls)
    assert len(calls) == 5 and values.reused == {"dataset": 1}
