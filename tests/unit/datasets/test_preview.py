"""``python -m ragbench.datasets preview``: the chunk tree as a job indexes it, limited in depth and count."""

from __future__ import annotations

import json

import pytest

from ragbench.datasets.__main__ import main


def depth(node: dict) -> int:
    return 1 + max((depth(c) for c in node.get("children", ())), default=-1)


def test_preview_json_depth_and_limit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", "dataset=multihop_rag", "--max-depth", "2", "--limit", "3", "--json"]) == 0
    trees = json.loads(capsys.readouterr().out)
    assert len(trees) == 3 and all(t["level"] == "document" for t in trees)
    assert max(depth(t) for t in trees) == 2  # document > section > paragraph, sentences not shown
    first_paragraph = trees[0]["children"][0]["children"][0]
    assert first_paragraph["level"] == "paragraph" and first_paragraph["text"].startswith("Title: ")
    assert first_paragraph["children_not_shown"] >= 1


def test_preview_outline_and_bad_limit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", "dataset=qasper", "chunker.search_level=paragraph", "--max-depth", "3", "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("document ") and "  section " in out and "(* = searched level)" in out
    assert any(line.strip().startswith("paragraph") and "*:" in line for line in out.splitlines())
    assert main(["preview", "dataset=qasper", "--limit", "0"]) == 1
    assert "--limit >= 1" in capsys.readouterr().err
