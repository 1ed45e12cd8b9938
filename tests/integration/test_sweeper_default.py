"""The compose-once sweeper is the default ``-m`` sweeper; ``hydra/sweeper=basic`` and experiments replace it
(subprocesses of ``python -m ragbench --cfg hydra``: an integration test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_ragbench_is_the_default_sweeper_and_experiments_can_replace_it():
    def sweeper(*overrides: str) -> str:
        out = subprocess.run([sys.executable, "-m", "ragbench", *overrides, "--cfg", "hydra", "-p",
                              "hydra.sweeper._target_"], capture_output=True, text=True, cwd=REPO, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert sweeper() == "hydra_plugins.ragbench_sweeper.ragbench_sweeper.RagbenchSweeper"
    assert sweeper("hydra/sweeper=basic") == "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
    assert "optuna" in sweeper("experiment=optuna_search")
