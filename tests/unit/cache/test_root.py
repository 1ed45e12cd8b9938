"""One environment variable roots every cache: the job cache (stage records and LLM replies), the
``python -m ragbench.cache`` default and the dataset downloads, which are never a stage nor pruned."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ragbench.cache import root
from ragbench.cache.cli import default_dir
from ragbench.cache.inventory import prune, stages
from ragbench.cache.keys import reply_key
from ragbench.cache.store import StageCache
from ragbench.config_check import CONF
from ragbench.datasets import download
from ragbench.errors import ConfigError


def test_ragbench_cache_roots_the_job_cache_the_cli_and_the_downloads(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGBENCH_CACHE", str(tmp_path))
    cfg = OmegaConf.load(CONF / "config.yaml")
    assert Path(cfg.cache.dir) == tmp_path == default_dir() == root.job_cache_dir()
    assert download.dataset_dir("locomo") == tmp_path / "datasets" / "locomo"
    monkeypatch.delenv("RAGBENCH_CACHE")
    assert str(OmegaConf.load(CONF / "config.yaml").cache.dir) == root.DEFAULT_DIR == str(default_dir())


def test_downloads_are_not_a_stage_and_never_pruned(tmp_path):
    store = StageCache(dir=str(tmp_path))
    store.put_record("llm", reply_key("chat", {"model": "m"}), {}, {"text": "x"})
    official = tmp_path / root.DOWNLOADS / "locomo" / "locomo10.json"
    official.parent.mkdir(parents=True)
    official.write_text("{}")
    assert stages(tmp_path) == ["llm"]
    time.sleep(0.01)
    prune(tmp_path, older_than_s=0.0)
    assert not list((tmp_path / "llm").rglob("*.json")) and official.is_file()  # the reply pruned, the download kept


@pytest.mark.parametrize("environ, error", [
    ({"RAGBENCH_STAGE_CACHE": "/big/disk"}, "the environment variable RAGBENCH_STAGE_CACHE was retired: "
                                            "RAGBENCH_CACHE now roots every cache"),
    ({"RAGBENCH_STAGE_CACHE": "/big/disk", "RAGBENCH_CACHE": "/x"}, "RAGBENCH_STAGE_CACHE was retired"),
    ({"RAGBENCH_STAGE_CACHE": ""}, None),  # set but empty: nothing is ignored
    ({"RAGBENCH_CACHE": "/x"}, None),
    ({}, None),
])
def test_a_retired_cache_variable_stops_the_job_naming_its_successor(environ, error):
    if error is None:
        root.check_retired(environ)
        return
    with pytest.raises(ConfigError, match=error) as info:
        root.check_retired(environ)
    assert 'fix: export RAGBENCH_CACHE="$RAGBENCH_STAGE_CACHE" and unset RAGBENCH_STAGE_CACHE' in str(info.value)
