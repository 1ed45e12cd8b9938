"""A wheel built from the repo runs on its own: configs and dataset samples ship inside it."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]


def test_wheel_runs_a_job_outside_the_repo(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist),
                    str(REPO)], check=True, timeout=600)
    (wheel,) = dist.glob("ragbench-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=True)  # dependencies from this environment
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True, timeout=600)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    where = subprocess.run([str(py), "-c", "import ragbench, sys; print(ragbench.__file__)"], cwd=work, env=env,
                           capture_output=True, text=True, check=True).stdout
    assert str(env_dir) in where  # the installed wheel, not the checkout
    proc = subprocess.run([str(py), "-m", "ragbench", "dataset=qasper", "dataset.sample_size=3",
                           f"cache.dir={tmp_path / 'cache'}"], cwd=work, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (work / "mlruns" / "mlflow.db").exists()
    assert "retrieval/hit_at_5" in proc.stdout
    listing = subprocess.run([str(py), "-m", "zipfile", "-l", str(wheel)], capture_output=True, text=True).stdout
    for name in ("ragbench/conf/config.yaml", "ragbench/conf/dataset/locomo.yaml",
                 "ragbench/datasets/samples/locomo/data/locomo10.json", "ragbench/datasets/samples/locomo/NOTICE"):
        assert name in listing, name
