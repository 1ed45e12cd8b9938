"""Hydra's basic grid sweeper is the default ``-m`` sweeper (ragbench's compose-once sweeper was removed: it
saved at most 6% of the design-card sweep); experiments replace it (subprocesses of
``python -m ragbench --cfg hydra``: an integration test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_basic_sweeper_is_the_default_and_experiments_can_replace_it():
    def sweeper(*overrides: str) -> str:
        out = subprocess.run([sys.executable, "-m", "ragbench", *overrides, "--cfg", "hydra", "-p",
                              "hydra.sweeper._target_"], capture_output=True, text=True, cwd=REPO, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert sweeper() == "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
    assert "optuna" in sweeper("experiment=optuna_search")
