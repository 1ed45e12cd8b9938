"""Every option of every config group composes AND builds (lightning-hydra-template's test_configs), and
every component class named by a ``_target_`` satisfies its Protocol in ``ragbench.protocols``.

Building must stay cheap: no model loads, no network (a socket opened here fails the test), no torch,
sentence-transformers or litellm import (components load lazily, on first use).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import socket
import sys
import tempfile
import typing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omegaconf import OmegaConf

from ragbench import protocols
from ragbench.build import build
from ragbench.datasets.evalgen.prompts import load_generation_prompts
from ragbench.generate.prompts import available, load_answer_prompt
from ragbench.judge.rubrics import load_rubrics
from ragbench.types import Answer, Document, Evidence, Hit, Paragraph, Query, Section
from tests.fixtures.jobs import compose_cfg
from tests.fixtures.rag_systems import behaves_as_system, responses_file

CONF = Path(__file__).resolve().parents[3] / "ragbench" / "conf"
GROUPS = ("dataset", "chunker", "embedder", "retrieval", "reranker", "expander", "llm", "judge", "tracking",
          "experiment", "query", "system")
HEAVY = ("torch", "sentence_transformers", "litellm")
SYSTEMS = {"responses": [f"system.path={responses_file()}"], "python": ["system.target=tests.fixtures.rag_systems:answer"],
           "http": ["system.url=http://127.0.0.1:9/answer"]}
KEYS = {"OPENAI_API_KEY": "sk-cfg-openai-1111", "ANTHROPIC_API_KEY": "sk-cfg-anthropic-2222"}


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def overrides_for(group: str, option: str) -> list[str]:
    extra = {"custom": ["dataset.path=."]}.get(option, []) if group == "dataset" else []
    # judge=llm must not grade its own generator: give it a generator of another model
    extra += ["llm=openai_compatible"] if (group, option) == ("judge", "llm") else []
    # an outside system (ragbench.systems) needs its file, function or URL; its components need a system
    extra += SYSTEMS.get(option, []) if group == "system" else []
    extra += ["system=python", *SYSTEMS["python"]] if option == "system" and group != "system" else []
    return [f"{group}={option}", *extra]


@functools.cache
def composed(group: str, option: str) -> Any:
    """One composition per option for the whole module (composing is the slow part); copied on use."""
    return compose_cfg(overrides_for(group, option), Path(tempfile.mkdtemp(prefix="ragbench-cfg-")))


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)

    def refuse(self, *args, **kwargs):
        raise AssertionError(f"building a component opened a connection to {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


CASES = [(g, o) for g in GROUPS for o in options(g)]


def test_every_group_has_options():
    assert {g for g, _ in CASES} == set(GROUPS)


@pytest.mark.parametrize(("group", "option"), CASES, ids=[f"{g}={o}" for g, o in CASES])
def test_every_option_composes_resolves_and_builds(group, option):
    heavy_before = {m for m in HEAVY if m in sys.modules}
    cfg = composed(group, option).copy()
    OmegaConf.resolve(cfg)  # every interpolation and resolver of the option resolves
    components, cache = build(cfg)
    assert cache is not None and components.generator is not None and components.judges
    # nothing heavy was imported by composing and building (skipped only if another test imported it first)
    assert {m for m in HEAVY if m in sys.modules} <= heavy_before


@pytest.mark.parametrize("kind", ["answer", "judge", "generate"])
def test_every_prompt_option_loads(kind):
    load = {"answer": load_answer_prompt, "judge": load_rubrics, "generate": load_generation_prompts}[kind]
    names = available(kind)
    assert names == sorted(p.stem for p in (CONF / "prompt" / kind).glob("*.yaml")) and names
    for name in names:
        assert load(name) is not None


# ------------------------------------------------------------------ contract: _target_ -> Protocol
def _targets(node: Any, path: str, found: list[tuple[str, str]]) -> None:
    if isinstance(node, dict):
        if "_target_" in node:
            found.append((path, str(node["_target_"])))
        for key, value in node.items():
            _targets(value, f"{path}.{key}" if path else str(key), found)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _targets(value, f"{path}.{i}", found)


def _protocol_of(group: str, path: str) -> type | None:
    if group == "retrieval":
        return protocols.Retriever if path.startswith("retriever") else None
    if group == "reranker":
        return protocols.Reranker if path.startswith("rerankers.") and path.count(".") == 1 else None
    if group == "judge":
        return protocols.Judge if path.startswith("judges.") and path.count(".") == 1 else None
    if group == "query":
        return protocols.QueryTransform if path == "transform" else None
    return {"dataset": protocols.DatasetAdapter, "chunker": protocols.Chunker, "embedder": protocols.Embedder,
            "expander": protocols.Expander, "llm": protocols.Generator}.get(group) if path == "" else None


def _implementations() -> list[tuple[type, str, str, str]]:
    rows: dict[tuple[str, str], tuple[type, str, str, str]] = {}
    for group in ("dataset", "chunker", "embedder", "retrieval", "reranker", "expander", "llm", "judge", "query"):
        for option in options(group):
            found: list[tuple[str, str]] = []
            _targets(OmegaConf.to_container(OmegaConf.load(CONF / group / f"{option}.yaml")), "", found)
            for path, target in found:
                proto = _protocol_of(group, path)
                if proto is not None:
                    rows.setdefault((proto.__name__, target), (proto, target, group, option))
    return sorted(rows.values(), key=lambda r: (r[0].__name__, r[1]))


IMPLEMENTATIONS = _implementations()


# optional capabilities (protocols.py): the stage protocol whose implementations may add each one
CAPABILITIES = {protocols.LoadableEmbedder: protocols.Embedder, protocols.BaselineRetriever: protocols.Retriever,
                protocols.PromptedGenerator: protocols.Generator, protocols.PromptedJudge: protocols.Judge,
                protocols.ExplainingJudge: protocols.Judge, protocols.FusedRetriever: protocols.Retriever,
                protocols.DepthLimited: protocols.Retriever, protocols.Preflight: protocols.Generator,
                protocols.RemoteEmbedder: protocols.Embedder,
                protocols.LoggedParams: protocols.Generator, protocols.LoggedTags: protocols.Judge,
                protocols.OutsideRetriever: protocols.Retriever, protocols.QueryExpander: protocols.Expander,
                protocols.QueryBound: protocols.Retriever, protocols.ApproximateRetriever: protocols.Retriever,
                protocols.TrajectoryRetriever: protocols.Retriever}


def test_contract_covers_every_protocol():
    named = {name for name in dir(protocols) if isinstance(getattr(protocols, name), type)
             and getattr(getattr(protocols, name), "_is_protocol", False) and name != "Protocol"}
    stage = {r[0].__name__ for r in IMPLEMENTATIONS}
    # implemented only outside the package (metrics.retrieval): tests/unit/judge/test_scorers.py and
    # tests/integration/test_extending.py hold its implementations
    # WaveAnswerer: not a configured component but the llm package's two ways to answer a wave (a provider
    # batch, the local model), tests/unit/test_waves.py and tests/unit/llm/test_batch_rounds.py
    # AnswerPostprocessor: a dataset's hook, a nested _target_ (dataset.postprocess), not a config group option:
    # tests/unit/datasets/test_case_fields_postprocess.py and tests/integration/test_case_fields_job.py
    outside = {protocols.RetrievalScorer.__name__, protocols.WaveAnswerer.__name__,
               protocols.AnswerPostprocessor.__name__}
    assert stage | {cap.__name__ for cap in CAPABILITIES} | outside == named
    for cap, base in CAPABILITIES.items():  # each capability has at least one configured implementation
        members = typing._get_protocol_attrs(cap)
        assert any(r[0] is base and all(_static(_built(r[2], r[3], r[1]), m) is not _MISSING for m in members)
                   for r in IMPLEMENTATIONS), f"no configured {base.__name__} implements {cap.__name__}"


@pytest.mark.parametrize(("proto", "target", "group", "option"),
                         [r for r in IMPLEMENTATIONS if r[0] in CAPABILITIES.values()],
                         ids=[f"{r[0].__name__}:{r[1].rsplit('.', 1)[-1]}" for r in IMPLEMENTATIONS
                              if r[0] in CAPABILITIES.values()])
def test_a_capability_is_whole_where_it_is_claimed(proto, target, group, option):
    """An implementation that has a capability's method has all of that capability's members."""
    obj = _built(group, option, target)
    for cap, base in CAPABILITIES.items():
        if base is not proto:
            continue
        members = typing._get_protocol_attrs(cap)
        methods = [m for m in members if callable(inspect.getattr_static(cap, m, None))]
        if any(_static(obj, m) is not _MISSING for m in methods):
            missing = [m for m in members if _static(obj, m) is _MISSING]
            assert not missing, f"{target} has part of ragbench.protocols.{cap.__name__} but lacks {missing}"


def _built(group: str, option: str, target: str) -> Any:
    components, _ = build(composed(group, option).copy())
    module, _, name = target.rpartition(".")
    candidates = [components.dataset, components.chunker, components.embedder, components.retriever,
                  *getattr(components.retriever, "children", ()), *components.rerankers, components.expander,
                  components.generator, *components.judges.values(), components.query]
    for obj in candidates:
        if type(obj).__module__ == module and type(obj).__qualname__ == name:
            return obj
    if inspect.isfunction(getattr(importlib.import_module(module), name, None)):
        # a factory target (query=decompose's decomposer): the component it built, a class of its module
        for obj in candidates:
            if type(obj).__module__ == module:
                return obj
    raise AssertionError(f"{target} (from {group}={option}) was not built")


DOC = Document(doc_id="d", title="Doc", sections=(Section(title="S", paragraphs=(
    Paragraph("Alice adopted a cat. The cat is called Tom."), Paragraph("Bob bought a red bicycle."))),))
QUERY = Query(qid="q", text="What is the cat called?", answers=("Tom",), question_type="t",
              evidence=(Evidence(text="The cat is called Tom"),), doc_ids=("d",))


def _ancestors(tree: Any, chunk_id: str) -> list[Any]:
    out, node = [], tree[chunk_id]
    while node.parent_id is not None:
        node = tree[node.parent_id]
        out.append(node)
    return out


def _behaves(proto: type, obj: Any) -> None:
    """A minimal behavioural check, where it costs no model and no network."""
    from ragbench.ingest.hierarchical import HierarchicalChunker

    tree = HierarchicalChunker().chunk([DOC])
    ids = [c.chunk_id for c in tree.searchable()]
    if isinstance(obj, protocols.OutsideRetriever | protocols.QueryExpander):  # an outside system's (ragbench.systems)
        behaves_as_system(obj, tree, ids)
    elif proto is protocols.Chunker:
        assert obj.chunk([DOC]).chunks and isinstance(dict(obj.params()), dict)
    elif proto is protocols.Retriever:
        if type(obj).__name__ == "RunFileRetriever":  # its hits come from a TREC run file, keyed by question id
            run = Path(tempfile.mkdtemp(prefix="ragbench-run-")) / "run.txt"
            run.write_text(f"q Q0 {ids[1]} 1 1.0 t\nq Q0 {ids[0]} 2 0.5 t\n")
            obj = type(obj)(path=str(run))
            obj.bind([Query(qid="q", text="cat called Tom", answers=(), question_type="t")])
        vecs = None
        if obj.needs_vectors:
            vecs = np.eye(len(ids), 8, dtype=np.float32)
        obj.build(ids=ids, texts=[tree[i].text for i in ids], vectors=vecs)
        hits = obj.search(texts=["cat called Tom"], vectors=None if vecs is None else vecs[1:2], k=2)
        if isinstance(obj, protocols.BaselineRetriever):  # retrieves nothing itself: hits come from the gold
            assert hits == [[]]
        else:
            assert len(hits) == 1 and 1 <= len(hits[0]) <= 2 and all(h.chunk_id in ids for h in hits[0])
    elif proto is protocols.Reranker and not type(obj).__name__.startswith("CrossEncoder"):
        hits = [Hit(chunk_id=i, score=1.0 / (n + 1), rank=n + 1) for n, i in enumerate(ids)]
        vecs = {i: np.eye(len(ids), 8, dtype=np.float32)[n] for n, i in enumerate(ids)}
        out = obj.rerank(QUERY, hits, tree=tree, k=2, query_vector=np.ones(8, dtype=np.float32) / 8 ** 0.5,
                         chunk_vectors=vecs if obj.needs_vectors else None)
        # a reranker keeps hits from its input, or (paragraph aggregation) their ancestors in the tree
        allowed = set(ids) | {a.chunk_id for i in ids for a in _ancestors(tree, i)}
        assert 1 <= len(out) <= 2 and {h.chunk_id for h in out} <= allowed
    elif proto is protocols.Expander:
        contexts = obj.expand([Hit(chunk_id=ids[1], score=1.0, rank=1)], tree)
        assert contexts and "Tom" in contexts[0].text
    elif proto is protocols.Generator and type(obj).__name__ == "ExtractiveAnswerer":
        assert isinstance(obj.answer(QUERY, []), Answer)
    elif proto is protocols.QueryTransform and obj.name in ("none", "rules"):  # no LLM: the question comes first
        assert obj.variants(QUERY)[0] == QUERY.text and obj.failures == 0
    elif proto is protocols.Judge and type(obj).__name__ == "LexicalJudge":
        scores = obj.judge(QUERY, [], Answer(text="Tom", model="m", latency_s=0.0))
        assert scores["answer/f1"] == 1.0


@pytest.mark.parametrize(("proto", "target", "group", "option"), IMPLEMENTATIONS,
                         ids=[f"{r[0].__name__}:{r[1].rsplit('.', 1)[-1]}" for r in IMPLEMENTATIONS])
def test_every_implementation_satisfies_its_protocol(proto, target, group, option):
    obj = _built(group, option, target)
    members = typing._get_protocol_attrs(proto)  # what isinstance checks, looked up without running code
    missing = [m for m in members if _static(obj, m) is _MISSING]
    assert not missing, f"{target} lacks {missing} of ragbench.protocols.{proto.__name__}"
    if not any(isinstance(inspect.getattr_static(proto, m, None), property) for m in members):
        # isinstance on Python 3.11 evaluates properties (APIEmbedder.dim would call the API): only
        # Protocols without properties are checked through isinstance itself
        assert isinstance(obj, proto), f"{target} does not satisfy ragbench.protocols.{proto.__name__}"
    _behaves(proto, obj)


_MISSING = object()


def _static(obj: Any, name: str) -> Any:
    found = inspect.getattr_static(obj, name, _MISSING)
    if found is _MISSING and name in getattr(type(obj), "__annotations__", {}):
        return _MISSING  # annotated on the class but never set
    return found
