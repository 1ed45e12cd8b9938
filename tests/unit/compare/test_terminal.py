"""The comparison on an 80-column terminal: per dataset and metric, each run on one line with its delta, CI,
Holm p and verdict; the deltas by question type and the failure taxonomy fit too."""

from __future__ import annotations

import io

import numpy as np
from rich.console import Console

from ragbench.compare import report
from ragbench.compare.analysis import analyse
from ragbench.compare.comparison import ALL, BASELINE
from ragbench.compare.terminal import _delta, dataset_labels, metric_labels, short_metric
from tests.unit.compare.synth import rows, run, scores

TYPES = ["single_hop", "open_domain", "temporal"] * 40


def _design_card() -> tuple:
    """Three top-k configurations on each of two datasets, five metrics: the README's compare command."""
    runs = []
    for ds, seed in (("locomo", 1), ("qasper", 7)):
        f1 = scores(120, seed)
        for i, (k, shift) in enumerate(((3, -0.05), (5, -0.02), (10, 0.0))):
            data = rows(np.clip(f1 + shift, 0, 1), types=TYPES, hit5=(f1 > 0.5).astype(float),
                        tokens=100.0 * k + 10 * f1, prefix="q")
            num = 2 * i + (ds == "qasper")
            runs.append(run(f"{ds}{k}", data, dataset=ds, name=f"topk={k} dataset={ds} #{num}"))
    return analyse(runs, metrics=["answer/f1", "retrieval/hit_at_5", "retrieval/mrr", "context/tokens",
                                  "latency/generate_p50_ms"], resamples=200)


def _render(monkeypatch, comp, taxa) -> str:
    out = io.StringIO()
    monkeypatch.setattr(report, "console", Console(file=out, width=80, color_system=None, highlight=False))
    report.print_table(comp, taxa)
    return out.getvalue()


def test_every_comparison_is_one_line_of_80_columns(monkeypatch):
    comp, taxa = _design_card()
    text = _render(monkeypatch, comp, taxa)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    labels = dataset_labels(comp)
    assert labels["locomo"]["locomo3"] == "topk=3 #0"  # the dataset is the table's title, not the label's
    for r in comp.records:
        if r.type != ALL:
            continue
        lab = labels[comp.baseline_of[r.run].dataset][r.run]
        head = f"{comp.baseline_of[r.run].dataset}: {r.metric} ("
        title = next(i for i, line in enumerate(lines) if line.startswith(head))
        row = next(line for line in lines[title:] if line.startswith(lab + " "))  # the run and all: one line
        assert f" {r.n} " in row
        if r.verdict == BASELINE:
            assert row.rstrip().endswith("= baseline")
        else:
            assert f"[{_delta(r.ci_low, 3)}, {_delta(r.ci_high, 3)}]" in row and _delta(r.delta) in row
    assert "not Holm-adjusted" in text  # the CI beside a Holm verdict says what it is


def test_types_and_taxonomy_fit_with_whole_labels(monkeypatch):
    comp, taxa = _design_card()
    text = _render(monkeypatch, comp, taxa)
    types = text[text.index("locomo: delta by question type"):]
    assert "  open_domain " in types and "  single_hop " in types  # never cut
    head = next(line for line in types.splitlines() if line.startswith("run / type"))
    assert head.split()[3:] == ["f1", "hit@5", "mrr", "tokens", "generate_p50_ms"]
    tax = text[text.index("locomo: failure taxonomy (cases)"):]
    assert "not ret." in tax and "no gold" in tax and "  temporal " in tax
    assert "f1 = answer/f1" in text and "not ret. = gold not retrieved" in text


def test_metric_labels_are_short_unless_two_would_share_one():
    assert short_metric("retrieval/hit_at_5") == "hit@5" and short_metric("context/tokens") == "tokens"
    assert metric_labels(["retrieval/hit_at_5", "retrieval/chunk/hit_at_5", "answer/f1"]) == {
        "retrieval/hit_at_5": "retrieval/hit_at_5", "retrieval/chunk/hit_at_5": "retrieval/chunk/hit_at_5",
        "answer/f1": "f1"}


def test_a_tied_default_baseline_is_said_to_be_tied():
    f1 = scores(60, 3)
    runs = [run(f"k{k}", rows(f1), name=f"topk={k} #{i}") for i, k in enumerate((3, 5, 10))]
    comp, _ = analyse(runs, metrics=["answer/f1"], resamples=200)
    note = next(n for n in comp.notes if n.startswith("baseline"))
    assert "the best of 3 configurations on answer/f1" in note and "topk=3 #0" in note
    assert "), tied with 2 others (the earliest taken); name another" in note


def test_baselines_from_a_file_each_get_their_row(monkeypatch, tmp_path):
    from ragbench.compare.runcases import load_baseline, save_baseline

    f1 = scores(50, 7)
    path = tmp_path / "baseline.json"
    save_baseline(path, [run("b1", rows(f1), name="#0 dataset=locomo,retrieval=bm25"),
                         run("d1", rows(f1 * 0.5), name="#1 dataset=locomo,retrieval=dense")])
    new = [run("b2", rows(f1), name="#1 dataset=locomo,retrieval=bm25"),
           run("d2", rows(f1 * 0.5), name="#0 dataset=locomo,retrieval=dense")]
    comp, taxa = analyse(new, metrics=["answer/f1"], baseline_runs=load_baseline(path), resamples=200)
    text = _render(monkeypatch, comp, taxa)
    table = text[text.index("locomo: answer/f1"):text.index("locomo: delta by question type")]
    assert table.count("(file)") == 2 and table.count("= baseline") == 2 and table.count("· not sig.") == 2
    assert max(len(line) for line in text.splitlines()) <= 80
