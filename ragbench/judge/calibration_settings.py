"""How a calibration reads a judge's scores as verdicts, and how much it resamples (``conf/calibrate.yaml``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ragbench.errors import ConfigError

SCALES = ("binary", "rubric")
PROBES = ("position", "verbosity", "repeat", "self_preference")  # ragbench.judge.probes defines each


@dataclass(frozen=True)
class Settings:
    """How verdicts are read and how much is resampled (``conf/calibrate.yaml``)."""

    scale: str = "binary"
    pass_at: float = 0.75
    max_score: int = 4
    keys: Mapping[str, str] = field(default_factory=dict)
    probes: tuple[str, ...] = ("position", "verbosity", "repeat", "self_preference")
    repeats: int = 3
    resamples: int = 2000
    seed: int = 0
    level: float = 0.95
    workers: int = 4

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise ConfigError(f"scale={self.scale!r} is not valid; choose one of {list(SCALES)}")
        unknown = sorted(set(self.probes) - set(PROBES))
        if unknown:
            raise ConfigError(f"probes={list(self.probes)}: unknown probe {unknown[0]!r}; choose from {list(PROBES)}")
        if not 0.0 < self.pass_at <= 1.0 or self.max_score < 1 or self.repeats < 2 or self.workers < 1:
            raise ConfigError("need 0 < pass_at <= 1, max_score >= 1, repeats >= 2 (the repeat probe asks again) "
                              f"and workers >= 1; got pass_at={self.pass_at}, max_score={self.max_score}, "
                              f"repeats={self.repeats}, workers={self.workers}")
        if self.resamples < 100 or not 0.5 <= self.level < 1.0:
            raise ConfigError(f"need resamples >= 100 and 0.5 <= level < 1, got {self.resamples} and {self.level}")

    def key(self, rubric: str) -> str:
        """The judge output key a rubric's labels are compared with."""
        return self.keys.get(rubric, f"judge/{rubric}")

    def verdict(self, score: float | None) -> int:
        """A normalised 0-1 score on the labels' scale (a failed judgment: the lowest class)."""
        if score is None:
            return 0
        if self.scale == "binary":
            return int(score >= self.pass_at - 1e-9)
        return int(round(score * self.max_score))

    def human_score(self, label: int) -> float:
        """A human label on the judge's normalised 0-1 scale (for the self-preference error)."""
        return float(label) if self.scale == "binary" else label / self.max_score
