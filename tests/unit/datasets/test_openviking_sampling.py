"""sampling=openviking: the suite's own subsets by question id, checked against what its script selects.

``tests/fixtures/openviking/sampling/expected.json`` holds the document and question ids that OpenViking's
``benchmark/RAG/scripts/sample_dataset.py`` (commit 6e944cc3, with ``scripts/run_sampling.py``'s arguments)
wrote for the bundled samples and for the synthetic sets built below (how they were recorded: that folder's
SOURCE.md; the script itself is AGPL-3.0 and is not copied into this Apache-2.0 repository). The ids
``ragbench.datasets.openviking_sampling`` keeps must be those.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

from ragbench.datasets import openviking_sampling as ov
from ragbench.datasets.base import bundled_sample
from ragbench.datasets.financebench import FinanceBenchAdapter
from ragbench.datasets.locomo import LocomoAdapter
from ragbench.datasets.qasper import QasperAdapter
from ragbench.datasets.syllabusqa import SyllabusQAAdapter
from ragbench.errors import ConfigError

SUITE = json.loads((Path(__file__).parents[2] / "fixtures" / "openviking" / "sampling" / "expected.json")
                   .read_text(encoding="utf-8"))  # "bundled/<dataset>" | "synthetic/<dataset>/<gen>": docs, qids


def suite_ids(key: str) -> tuple[list[str], list[str]]:
    """(doc ids, question ids) the suite's script wrote for ``key``."""
    got = SUITE[key]
    return got["docs"], got["qids"]


@pytest.mark.parametrize("dataset", sorted(ov.SIZES))
def test_same_subset_as_the_suites_script(dataset: str) -> None:
    docs, qids = suite_ids(f"bundled/{dataset}")
    sel = ov.select(dataset, bundled_sample(dataset))
    assert sorted(sel.qids) == sorted(qids)
    assert len(set(qids)) == len(qids)
    # FinanceBench writes only the documents that kept a question; the others list every kept document
    assert (set(docs) <= set(sel.doc_ids)) if dataset == "financebench" else (sorted(sel.doc_ids) == sorted(docs))


# The bundled samples' subsets, listed (the suite's script gives the same, as the test above checks).
EXPECTED_DOCS = {
    "locomo": ("conv-26", "conv-30"),  # the sample has 2 conversations (< 3): both, 80 questions + category 5
    "syllabusqa": ("Syllabus Bio 544 lecture S23", "Sch Mgmt 652 Syllabus - Fully OnLine",
                   "BDES-Syllabus-2021-v1rsb", "Legal 297BL Syllabus"),
    "qasper": ("1909.00694", "2003.07723", "1705.09665"),
    "financebench": ("AMERICANEXPRESS_2022_10K", "PEPSICO_2023_8K_dated-2023-05-30", "GENERALMILLS_2022_10K"),
}
EXPECTED_FINANCEBENCH = ("financebench_id_00723", "financebench_id_00476", "financebench_id_01964",
                         "financebench_id_00882", "financebench_id_00705", "financebench_id_10136")
EXPECTED_LOCOMO_CONV30 = (0, 3, 5, 10, 11, 18, 19, 22, 23, 24, 26, 27, 30, 31, 34, 35, 42, 50, 53, 66, 67, 70, 71,
                          72, 73, 76, 79, 82, 83, *range(84, 105))


def test_bundled_sample_ids() -> None:
    got = {d: ov.select(d, bundled_sample(d)) for d in ov.SIZES}
    assert {d: s.doc_ids for d, s in got.items()} == EXPECTED_DOCS
    assert got["financebench"].qids == EXPECTED_FINANCEBENCH
    assert tuple(int(q.split("/q")[1]) for q in got["locomo"].qids if q.startswith("conv-30/")) \
        == EXPECTED_LOCOMO_CONV30
    assert (len(got["locomo"].qids), len(got["syllabusqa"].qids), len(got["qasper"].qids)) == (151, 129, 18)


@pytest.mark.parametrize("cls,dataset", [(LocomoAdapter, "locomo"), (QasperAdapter, "qasper"),
                                         (SyllabusQAAdapter, "syllabusqa"), (FinanceBenchAdapter, "financebench")])
def test_adapter_keeps_the_suites_questions(cls: type, dataset: str) -> None:
    # the suite reads every split file present (SyllabusQA's three CSVs; the Qasper sample has only train)
    extra = {"locomo": {"include_adversarial": True}, "syllabusqa": {"split": "all"}}.get(dataset, {})
    evalset = cls(name=dataset, sampling="openviking", **extra).load()
    sel = ov.select(dataset, bundled_sample(dataset))
    assert {q.qid for q in evalset.queries} == set(sel.qids)
    assert {d.doc_id for d in evalset.documents} <= set(sel.doc_ids)
    assert cls(name=dataset, **extra).load().fingerprint != evalset.fingerprint


def test_hydra_preset_sets_the_dataset_key() -> None:
    with initialize_config_module(version_base=None, config_module="ragbench.conf"):
        assert compose("config", overrides=["sampling=openviking"]).dataset.sampling == "openviking"
        assert "sampling" not in compose("config").dataset


def test_preset_errors() -> None:
    with pytest.raises(ConfigError, match="suite's datasets"):
        ov.check_preset("openviking", dataset="beir", num_docs=None, sample_size=None)
    with pytest.raises(ConfigError, match="sets its own sizes"):
        LocomoAdapter(name="locomo", sampling="openviking", num_docs=2)
    with pytest.raises(ConfigError, match="not a sampling preset"):
        LocomoAdapter(name="locomo", sampling="suite")


def test_stratified_hand_worked() -> None:
    """7 over 3 strata: targets 3/2/2 by name order; 'b' has 1, so its missing one goes round (to 'a')."""
    got = ov.stratified(7, {"c": ["c1", "c2", "c3"], "a": ["a1", "a2", "a3", "a4", "a5"], "b": ["b1"]})
    assert len(got) == 7 and sum(x.startswith("a") for x in got) == 4 and "b1" in got
    assert sum(x.startswith("c") for x in got) == 2


# ---------------------------------------------------------------- larger synthetic sets
# The bundled samples have fewer documents than the suite draws for LoCoMo, SyllabusQA and Qasper, so
# these sets (built here, in the official layouts, several generator seeds) take the document draws, the
# short strata (reallocation) and repeated questions through both implementations. A Qasper question's
# annotations share one answer kind: with several, the script's type follows a set's order (PYTHONHASHSEED).
def synthetic(dataset: str, root: Path, gen: int) -> None:
    import random

    rng = random.Random(gen)
    if dataset == "locomo":
        data = []
        for i in range(9):
            qa = [{"question": f"q{i}.{j}", "answer": "a", "category": rng.choice([1, 1, 2, 3, 4, 5]), "evidence": []}
                  for j in range(rng.randint(5, 40))]
            qa.append(dict(qa[0]))  # a repeated question: the suite keeps the first of equal ones
            data.append({"sample_id": f"conv-{i}", "conversation": {}, "qa": qa})
        (root / "data").mkdir(parents=True)
        (root / "data" / "locomo10.json").write_text(json.dumps(data))
    elif dataset == "syllabusqa":
        (root / "data" / "dataset_split").mkdir(parents=True)
        types = ["single factual", "multi factual", "no answer", "summarization", "yes/no", "reasoning"]
        for split in ov.SYLLABUS_FILES:
            with open(root / "data" / "dataset_split" / split, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=["id", "syllabus_name", "question_type", "question"])
                w.writeheader()
                for j in range(rng.randint(30, 80)):
                    w.writerow({"id": f"{split}-{j}", "syllabus_name": f"syl {rng.randint(0, 11)}",
                                "question_type": rng.choice(types), "question": "q"})
    elif dataset == "qasper":
        root.mkdir(parents=True)
        kinds = [{"unanswerable": True}, {"extractive_spans": ["x"]}, {"free_form_answer": "y"}, {"yes_no": True},
                 {"free_form_answer": " "}]
        for n, name in enumerate(ov.QASPER_FILES):
            papers = {f"p{n}.{i}": {"qas": [
                {"question_id": f"p{n}.{i}.{j}", "answers": [{"answer": dict(kind)} for _ in range(rng.randint(1, 3))]}
                for j, kind in enumerate([rng.choice(kinds) for _ in range(rng.randint(0, 12))])]} for i in range(7)}
            (root / name).write_text(json.dumps(papers))
    else:
        (root / "data").mkdir(parents=True)
        rows = [{"financebench_id": f"fb{j}", "doc_name": f"DOC{rng.randint(0, 9)}",
                 "question_type": rng.choice(["domain-relevant", "metrics-generated", "novel-generated"])}
                for j in range(60)]
        (root / "data" / "financebench_open_source.jsonl").write_text("\n".join(json.dumps(r) for r in rows))


@pytest.mark.parametrize("gen", [1, 2, 3])
@pytest.mark.parametrize("dataset", sorted(ov.SIZES))
def test_synthetic_sets_match_the_suite(dataset: str, gen: int, tmp_path: Path) -> None:
    root = tmp_path / "official"
    synthetic(dataset, root, gen)
    docs, qids = suite_ids(f"synthetic/{dataset}/{gen}")
    sel = ov.select(dataset, root)
    assert sorted(sel.qids) == sorted(qids)
    assert (set(docs) <= set(sel.doc_ids)) if dataset == "financebench" else (sorted(sel.doc_ids) == sorted(docs))
    assert len(sel.doc_ids) == ov.SIZES[dataset][0]  # each set has more documents than the suite draws


@pytest.mark.parametrize("kinds,expected", [
    (("extractive", "free_form"), "free_form"), (("extractive", "yes_no"), "yes_no"),
    (("free_form", "yes_no"), "yes_no"), (("extractive", "free_form", "yes_no"), "yes_no"),
    (("extractive",), "extractive"), (("free_form",), "free_form"), (("yes_no",), "yes_no")])
def test_a_qasper_question_of_several_answer_types_takes_the_suites_choice_under_hash_seed_0(kinds, expected):
    """The suite's ``next(iter(set))`` under PYTHONHASHSEED=0 on CPython 3.11+ (``python -c`` with that seed
    gives free_form, yes_no, yes_no, yes_no for the four mixes above); ragbench's choice never varies."""
    body = {"extractive": {"extractive_spans": ["x"]}, "free_form": {"free_form_answer": "y"},
            "yes_no": {"yes_no": True}}
    qa = {"answers": [{"answer": body[k]} for k in kinds] + [{"answer": {"unanswerable": True}}]}
    assert ov._qasper_type(qa) == expected
