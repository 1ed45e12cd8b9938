"""The dataset protocol lives on the adapter: scope, evidence level and doc recall are class attributes, no
table of dataset names elsewhere, and a retrieval config without ``scope`` takes the adapter's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ragbench.datasets.base import BaseAdapter
from ragbench.datasets.beir import BEIRAdapter
from ragbench.datasets.custom import CustomAdapter
from ragbench.datasets.financebench import FinanceBenchAdapter
from ragbench.datasets.locomo import LocomoAdapter
from ragbench.datasets.multihop_rag import MultiHopRAGAdapter
from ragbench.datasets.qasper import QasperAdapter
from ragbench.datasets.syllabusqa import SyllabusQAAdapter
from ragbench.errors import ConfigError
from ragbench.scopes import declared_scope, default_scope

PROTOCOL = [  # adapter, default scope, evidence level, doc recall (the published protocols)
    (LocomoAdapter, "document", "passage", False), (QasperAdapter, "document", "passage", False),
    (SyllabusQAAdapter, "document", "passage", False), (FinanceBenchAdapter, "document", "document", False),
    (MultiHopRAGAdapter, "corpus", "document", True), (BEIRAdapter, "corpus", "document", False),
    (CustomAdapter, "corpus", "passage", False),
]


@pytest.mark.parametrize("adapter,scope,level,doc_recall", PROTOCOL)
def test_each_adapter_declares_its_protocol(adapter, scope, level, doc_recall):
    assert (adapter.default_scope, adapter.evidence_level, adapter.doc_recall) == (scope, level, doc_recall)
    assert default_scope(f"{adapter.__module__}.{adapter.__name__}") == scope


def test_no_table_of_dataset_names_where_the_protocol_is_applied():
    root = Path(__file__).resolve().parents[3] / "ragbench"
    names = re.compile(r"""["'](locomo|qasper|syllabusqa|financebench|multihop_rag|beir|custom)["']""")
    files = [root / "retrieval" / "scope.py", root / "judge" / "retrieval.py", root / "cases.py", root / "verify.py",
             root / "app.py", *(root / "tracking").rglob("*.py")]
    found = [f"{p.relative_to(root)}: {m.group(0)}" for p in files for m in names.finditer(p.read_text())]
    assert found == []


def test_an_adapter_outside_the_package_declares_its_own_scope():
    class Mine(BaseAdapter):
        default_scope = "document"

    assert declared_scope(Mine, "Mine") == "document"
    with pytest.raises(ConfigError, match="declares no default_scope; fix: subclass"):
        declared_scope(object(), "plain")
    with pytest.raises(ConfigError, match="dataset._target_='nowhere.Adapter' cannot be imported"):
        default_scope("nowhere.Adapter")
    assert default_scope(None) == "corpus"  # no dataset configured


def test_a_retrieval_config_without_scope_takes_the_dataset_s(monkeypatch):
    """The reported regression: a user's minimal retriever config (no ``scope``) searched the corpus on LoCoMo
    (hit@5 0.4459 -> 0.4069); the adapter's declaration is the default, an explicit scope still wins."""
    from ragbench import build as app

    def components(retrieval: dict) -> str:
        cfg = OmegaConf.create({
            "dataset": {"_target_": "ragbench.datasets.locomo.LocomoAdapter", "name": "locomo"},
            "chunker": {"_target_": "ragbench.ingest.hierarchical.HierarchicalChunker"},
            "retrieval": {"topk": 5, "retriever": {"_target_": "ragbench.retrieval.bm25.BM25Retriever"}, **retrieval},
            "reranker": {}, "expander": {"_target_": "ragbench.expand.ParentExpander"}, "stages": "retrieval",
        })
        return app._components(cfg).scope

    monkeypatch.setattr(app, "builds_llm", lambda cfg: False)
    monkeypatch.setattr(app, "query_options", lambda cfg, inst: {})
    assert components({}) == "document"
    assert components({"scope": "corpus"}) == "corpus"
