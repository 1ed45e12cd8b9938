"""The default sweeper composes each job's config once and still validates the whole batch first."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from hydra_plugins.ragbench_sweeper.ragbench_sweeper import ComposeOnce


class CountingLoader:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def load_sweep_config(self, master_config, sweep_overrides):
        self.calls.append(tuple(sweep_overrides))
        if "dataset=nope" in sweep_overrides:
            raise ValueError("Could not find 'dataset/nope'")
        return OmegaConf.create({"overrides": list(sweep_overrides), "hydra": {"job": {}}})

    def get_search_path(self):
        return "search path"


def test_validated_configs_are_handed_to_the_launcher_once_each():
    inner, master = CountingLoader(), OmegaConf.create({})
    loader = ComposeOnce(inner)
    batch = [["retrieval.topk=3"], ["retrieval.topk=5"]]
    for overrides in batch:
        loader.validate(master, overrides)
    first = loader.load_sweep_config(master, ["retrieval.topk=3"])
    second = loader.load_sweep_config(master, ["retrieval.topk=5"])
    assert inner.calls == [("retrieval.topk=3",), ("retrieval.topk=5",)]  # 2 jobs, 2 compositions
    assert loader.composed == 2
    assert first.overrides == ["retrieval.topk=3"] and second.overrides == ["retrieval.topk=5"]
    # a config is handed over once: asking again composes afresh (the launcher mutates what it gets)
    again = loader.load_sweep_config(master, ["retrieval.topk=3"])
    assert again is not first and len(inner.calls) == 3
    assert loader.get_search_path() == "search path"  # everything else goes to Hydra's loader


def test_a_bad_job_fails_validation_before_any_job_runs():
    loader = ComposeOnce(CountingLoader())
    loader.validate(OmegaConf.create({}), ["dataset=locomo"])
    with pytest.raises(ValueError, match="dataset/nope"):
        loader.validate(OmegaConf.create({}), ["dataset=nope"])


def test_memory_stays_bounded_on_huge_batches():
    inner, master = CountingLoader(), OmegaConf.create({})
    loader = ComposeOnce(inner, keep_at_most=2)
    for k in range(5):
        loader.validate(master, [f"retrieval.topk={k}"])
    for k in range(5):
        assert loader.load_sweep_config(master, [f"retrieval.topk={k}"]).overrides == [f"retrieval.topk={k}"]
    assert len(inner.calls) == 5 + 3  # the first two were kept, the other three composed again


def test_pickled_for_worker_processes_without_the_kept_configs():
    import pickle

    loader = ComposeOnce(CountingLoader())
    loader.validate(OmegaConf.create({}), ["retrieval.topk=3"])
    copy = pickle.loads(pickle.dumps(loader))
    assert copy._composed == {} and copy.get_search_path() == "search path"  # noqa: SLF001
