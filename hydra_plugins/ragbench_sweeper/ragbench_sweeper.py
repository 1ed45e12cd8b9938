"""Hydra's basic sweeper, composing each job's config once instead of twice.

The basic sweeper composes every job's config to validate the batch before launching it, then the
launcher composes each one again. A ragbench config takes about 0.1 s to compose, so the design-card
sweep (6 jobs) spent over half a second composing configs it already had. This sweeper keeps the
configs it validated and hands them to the launcher when the launcher composes in the sweep's own
process (basic, ray). joblib and submitit compose in their worker processes, which get Hydra's loader
without the kept configs. Validation is unchanged: a bad override still fails before the first job.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

# No `from __future__ import annotations`: Hydra executes plugin modules outside sys.modules, where
# dataclasses cannot resolve string annotations.
KEEP_AT_MOST = 64  # composed configs held for the launcher; later jobs of a huge batch are composed again


class ComposeOnce:
    """A config loader that returns a config composed earlier (once) for the same job's overrides."""

    def __init__(self, loader: Any, keep_at_most: int = KEEP_AT_MOST) -> None:
        self._loader = loader
        self._keep_at_most = keep_at_most
        self._composed: dict[tuple[int, tuple[str, ...]], DictConfig] = {}
        self.composed = 0  # how many configs were actually composed (for tests and benchmarks)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_loader", "_keep_at_most", "_composed"):
            raise AttributeError(name)
        return getattr(self._loader, name)

    def __reduce__(self) -> tuple[Any, ...]:
        # launchers that compose in worker processes (joblib) pickle the loader: send it without the
        # configs kept here; the worker composes its own job's config, as it would with Hydra's loader
        return (ComposeOnce, (self._loader, self._keep_at_most))

    def validate(self, master_config: DictConfig, sweep_overrides: Sequence[str]) -> None:
        """Composes the job's config (raising on a bad override) and keeps it for the launcher."""
        cfg = self._compose(master_config, sweep_overrides)
        if len(self._composed) < self._keep_at_most:
            self._composed[(id(master_config), tuple(sweep_overrides))] = cfg

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        kept = self._composed.pop((id(master_config), tuple(sweep_overrides)), None)
        return kept if kept is not None else self._compose(master_config, sweep_overrides)

    def _compose(self, master_config: DictConfig, sweep_overrides: Sequence[str]) -> DictConfig:
        self.composed += 1
        return self._loader.load_sweep_config(master_config, list(sweep_overrides))


class RagbenchSweeper(BasicSweeper):
    """``hydra/sweeper=ragbench`` (the default): the basic sweeper's grid, each config composed once."""

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        loader = ComposeOnce(hydra_context.config_loader)
        super().setup(hydra_context=HydraContext(config_loader=loader, callbacks=hydra_context.callbacks),
                      task_function=task_function, config=config)

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        assert self.hydra_context is not None and self.config is not None
        loader = self.hydra_context.config_loader
        assert isinstance(loader, ComposeOnce)
        for overrides in batch:
            loader.validate(self.config, overrides)


@dataclass
class RagbenchSweeperConf:
    _target_: str = "hydra_plugins.ragbench_sweeper.ragbench_sweeper.RagbenchSweeper"
    max_batch_size: Optional[int] = None  # noqa: UP045 - OmegaConf reads typing.Optional
    params: Optional[dict[str, str]] = None  # noqa: UP045


ConfigStore.instance().store(group="hydra/sweeper", name="ragbench", node=RagbenchSweeperConf, provider="ragbench")
