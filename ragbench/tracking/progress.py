"""Sweep-level progress in the log: how many jobs a sweep has, and "job 2/6: <overrides>" as each starts."""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("ragbench")

SIZE_FILE = "ragbench_sweep_size"


def sweep_size(config: DictConfig) -> int | None:
    """The number of jobs of the sweep ``config`` starts: the grid of a basic (or ragbench) sweeper,
    ``n_trials`` of a search sweeper, None when neither can be told up front."""
    sweeper = OmegaConf.select(config, "hydra.sweeper", default=None)
    trials = OmegaConf.select(config, "hydra.sweeper.n_trials", default=None)
    if isinstance(trials, int):
        return trials
    if sweeper is None or "n_trials" in sweeper:
        return None
    try:
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
        from hydra.core.override_parser.overrides_parser import OverridesParser

        params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
        task = [str(o) for o in config.hydra.overrides.task] + [f"{k}={v}" for k, v in params.items()]
        batches = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(task), None)
    except Exception:  # noqa: BLE001 - a sweep type the grid cannot count: no total, no harm
        return None
    return sum(len(b) for b in batches)


def write_sweep_size(config: DictConfig, sweep_dir: Path) -> None:
    """Beside the parent-run file, so every job (in any process or node) can say "job n/N"."""
    size = sweep_size(config)
    if size is not None:
        (sweep_dir / SIZE_FILE).write_text(str(size))


def job_started(config: DictConfig) -> None:
    """Logs ``job 2/6: retrieval.topk=5,dataset=locomo`` at the start of a sweep's job."""
    num = OmegaConf.select(config, "hydra.job.num", default=None)
    if num is None:
        return
    size_file = Path(str(OmegaConf.select(config, "hydra.sweep.dir", default="."))) / SIZE_FILE
    total = size_file.read_text().strip() if size_file.is_file() else "?"
    name = OmegaConf.select(config, "hydra.job.override_dirname", default="") or ""
    log.info("job %d/%s: %s", int(num) + 1, total, name)
