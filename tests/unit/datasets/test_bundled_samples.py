"""The bundled samples are byte copies of the official files (checksums from SOURCE.md) with a NOTICE."""

from __future__ import annotations

import fnmatch
import hashlib
import tomllib
from pathlib import Path

import pytest

import ragbench
from ragbench.datasets.base import bundled_sample

SHA = {
    "syllabusqa": {
        "data/dataset_split/train.csv": "2175f25296602b7fd16d3ff21aeeb179188b362e6f9928e834c13535199faa4f",
        "data/dataset_split/train.json": "de043d4131241b5bca2a4987d526d5fadd76248d45a9213f62dbe3488ba7c7cc",
        "data/dataset_split/val.csv": "b009443084467f2573f86b05e4ad72bacb70cf57df88fa445ef1764f782ef106",
        "data/dataset_split/val.json": "a95a01be125d1e158ca4dee0c3653c40b310814ee22e409998067da9d64d2c5e",
        "data/dataset_split/test.csv": "638c715ef2b67dd58904090b2e1ea6e643ad96167ca05fd4e4dfa5e3bf319ec4",
        "data/dataset_split/test.json": "486108db344f57c043c9f434cc4dfe1d458111d3a419cd3c6beb72337ab59ef6",
        "syllabi/syllabi_meta_info.csv": "883522333967135024f5b14a8f814983946f0a06c5461d3cb1976925d3686f7b",
    },
    "financebench": {
        "data/financebench_open_source.jsonl": "aca84fddfda0f2bbe5334d47ac76165a61bd924f63eddecf33e22d7c401f840d",
        "data/financebench_document_information.jsonl":
            "d4c7003f0a49a28f25d71465e909f06d761e3b3e114f59b7bb59a10b6420f595",
    },
}


@pytest.mark.parametrize("name", ["syllabusqa", "financebench"])
def test_sample_files_match_source_checksums(name):
    root = bundled_sample(name)
    for rel, sha in SHA[name].items():
        assert hashlib.sha256((root / rel).read_bytes()).hexdigest() == sha, rel


@pytest.mark.parametrize("name", ["locomo", "qasper", "syllabusqa", "financebench", "multihop_rag"])
def test_every_sample_has_a_notice_and_ships_with_the_package(name):
    root = bundled_sample(name)
    notice = (root / "NOTICE").read_text(encoding="utf-8")
    assert "License" in notice or "license" in notice
    pyproject = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["ragbench"]
    package = Path(ragbench.__file__).parent
    for p in root.rglob("*"):
        if p.is_file():
            rel = p.relative_to(package).as_posix()
            assert any(fnmatch.fnmatch(rel, pat) for pat in patterns), f"{rel} would not be installed"


def test_syllabusqa_sample_has_the_text_and_word_syllabi():
    root = bundled_sample("syllabusqa") / "syllabi/syllabi_redacted"
    stems = {p.stem for p in (root / "text").glob("*.txt")}
    assert stems == {p.stem for p in (root / "word").glob("*.docx")} and len(stems) == 4
