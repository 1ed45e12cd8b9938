"""An outside system's parameters need no "+": ``system.params.top_k=3,5`` works as written."""

from __future__ import annotations

from ragbench.config_check import open_overrides


def test_system_params_are_force_added_and_nothing_else_changes():
    args = ["-m", "system=python", "system.params.top_k=3,5", "+system.params.a=1", "++system.params.b=2",
            "retrieval.topk=3", "system.params"]
    assert open_overrides(args) == ["-m", "system=python", "++system.params.top_k=3,5", "+system.params.a=1",
                                    "++system.params.b=2", "retrieval.topk=3", "system.params"]
