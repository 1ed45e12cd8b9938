"""A ``dataset.path`` that does not exist is found before any store is opened or run created: on the command
line (``check_overrides``, every value of a sweep) and in the composed config (``check_config``, e.g. a path
set in an experiment file), as the adapter names it (issue 27 item 9)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from ragbench.config_check import check_config, check_overrides
from ragbench.errors import DatasetError


@pytest.mark.parametrize(("args", "phrase", "fix"), [
    (["dataset=custom", "dataset.path=/nonexistent/kb"], "dataset 'custom', file '/nonexistent/kb': dataset.path "
     "does not exist", "create that folder with your documents and QA file, or correct dataset.path"),
    (["-m", "dataset=custom", "dataset.path={tmp},/nonexistent/kb2"], "file '/nonexistent/kb2'", "create that folder"),
    (["dataset.path=/nonexistent/locomo"], "dataset 'locomo', file '/nonexistent/locomo'",
     "set dataset.path to the folder holding the official locomo files, or run `python -m ragbench.datasets "
     "download locomo`"),
    (["dataset=qasper", "dataset.path='~/nonexistent-ragbench-qasper'"], "nonexistent-ragbench-qasper",
     "official qasper files"),
], ids=["custom", "sweep-second-value", "locomo-default", "home-relative"])
def test_a_missing_path_on_the_command_line(tmp_path, args, phrase, fix):
    with pytest.raises(DatasetError) as info:
        check_overrides([a.format(tmp=tmp_path) for a in args])
    first, _, second = str(info.value).partition("\n  fix: ")
    assert phrase in first and fix in second and "\n" not in second


@pytest.mark.parametrize("args", [["dataset=custom", "dataset.path={tmp}"], ["dataset.path=null"], [],
                                  ["dataset.path=${{oc.env:NOWHERE_RAGBENCH,/x}}"]],
                         ids=["exists", "null", "bundled-sample", "interpolation"])
def test_paths_that_exist_or_are_not_paths_pass(tmp_path, args):
    check_overrides([a.format(tmp=tmp_path) for a in args])


def test_a_missing_path_in_the_composed_config(tmp_path):
    GlobalHydra.instance().clear()
    with initialize_config_module("ragbench.conf", version_base="1.3"):
        cfg = compose("config", overrides=["dataset=custom", f"dataset.path={tmp_path}/gone"])
    with pytest.raises(DatasetError) as info:
        check_config(cfg)
    assert f"file '{tmp_path}/gone': dataset.path does not exist" in str(info.value)
    GlobalHydra.instance().clear()
    with initialize_config_module("ragbench.conf", version_base="1.3"):
        check_config(compose("config", overrides=["dataset=custom", f"dataset.path={tmp_path}"]))
