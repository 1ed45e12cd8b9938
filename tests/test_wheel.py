"""A wheel built from the repo runs on its own: configs and dataset samples ship inside it."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]


def see_dependencies_of_this_environment(py: Path) -> None:
    """Lets the venv of ``py`` import what the environment running the tests has installed.

    ``system_site_packages=True`` would show the base interpreter's packages, which are not the
    dependencies when the tests run inside a venv (as the README has users do). A ``.pth`` line
    appends this environment's site-packages folders, after the venv's own, so the wheel installed
    there wins over any editable install of the checkout, and ``site.addsitedir`` also runs their
    ``.pth`` files (namespace packages, ``distutils-precedence``).
    """
    inner = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    outer = [p for p in dict.fromkeys(site.getsitepackages() + [site.getusersitepackages()])
             if Path(p).is_dir() and Path(p).resolve() != Path(inner).resolve()]
    (Path(inner) / "_ragbench_test_outer_env.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({p!r})" for p in outer) + "\n")


def test_wheel_runs_a_job_outside_the_repo(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist),
                    str(REPO)], check=True, timeout=600)
    (wheel,) = dist.glob("ragbench-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    # --force-reinstall: pip must not take a ragbench it can see elsewhere (an egg-info the wheel build
    # left in the checkout) as this one; the dependencies are made visible only after the install
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)],
                   check=True, timeout=600, env=env)
    see_dependencies_of_this_environment(py)
    work = tmp_path / "elsewhere"
    work.mkdir()
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
                 "ragbench/datasets/samples/locomo/data/locomo10.json", "ragbench/datasets/samples/locomo/NOTICE",
                 "ragbench/datasets/pins/syllabusqa.sha256"):
        assert name in listing, name
