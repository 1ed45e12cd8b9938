"""One environment variable roots every cache: the job cache (stage records and LLM replies), the
``python -m ragbench.cache`` default and the dataset downloads, which are never a stage nor pruned."""

from __future__ import annotations

import time
from pathlib import Path

from omegaconf import OmegaConf

from ragbench.cache import root
from ragbench.cache.cli import default_dir
from ragbench.cache.inventory import prune, stages
from ragbench.cache.keys import reply_key
from ragbench.cache.store import StageCache
from ragbench.config_check import CONF
from ragbench.datasets import download


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
