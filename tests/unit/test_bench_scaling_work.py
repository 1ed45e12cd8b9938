"""``benchmarks/bench_scaling.py --work DIR``: a missing folder is made, a file is one line and exit 2 (run
in-process with no path, so nothing is measured)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_scaling.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_scaling", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_missing_work_folder_is_made(bench: ModuleType, tmp_path: Path) -> None:
    work = tmp_path / "new" / "deeper"
    assert bench.main(["--work", str(work), "--paths", ""]) == 0
    assert work.is_dir()


def test_a_work_path_that_is_a_file_is_one_line(bench: ModuleType, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("x")
    for work in (tmp_path / "afile", tmp_path / "afile" / "below"):
        assert bench.main(["--work", str(work), "--paths", ""]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"bench_scaling: --work {work}: ") and err.count("\n") == 1
        assert "fix: give a" in err and "Traceback" not in err
