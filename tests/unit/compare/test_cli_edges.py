"""``python -m ragbench.compare`` at its edges, in process, on synthetic runs (no store): options out of range,
outputs that cannot be written, Ctrl-C, run id prefixes. Each is one line naming the option or path and
the fix, exit 2 (130 for Ctrl-C), never a traceback."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ragbench.compare import select
from ragbench.compare.cli import main
from ragbench.errors import ConfigError
from tests.unit.compare.synth import rows, run, scores

TYPES = ["single-hop", "temporal"] * 20


@pytest.fixture
def store(monkeypatch):
    """Two synthetic runs where the store would be; ``calls`` counts the runs read (0: refused before)."""
    runs = {"a": run("a", rows(scores(40, 1), types=TYPES)), "b": run("b", rows(scores(40, 2), types=TYPES))}
    calls: list[str] = []
    monkeypatch.setattr(select, "open_store", lambda uri: object())
    monkeypatch.setattr(select, "find_runs", lambda client, uri, experiment, **kw: (
        calls.append("find") or [SimpleNamespace(run_id=k) for k in runs], []))
    monkeypatch.setattr(select, "load_cases", lambda client, r: runs[r.run_id])
    return calls


def _under_a_file(tmp_path: Path) -> Path:
    (tmp_path / "afile").write_text("x")
    return tmp_path / "afile"


# (case id, arguments (tmp is replaced by the test's folder), phrase of the one line, the runs were read)
CASES = [
    ("tolerance-nan", ["--tolerance", "nan"], "--tolerance nan: use a finite number >= 0", False),
    ("tolerance-inf", ["--tolerance", "inf"], "--tolerance inf: use a finite number >= 0", False),
    ("tolerance-negative", ["--tolerance", "-0.1"], "--tolerance -0.1: use a finite number >= 0", False),
    ("alpha-nan", ["--alpha", "nan"], "--alpha nan: use a number from 0.0001 up to 1 (not 1)", False),
    # 1e-320 passed the old range check, then 2 m / alpha randomisations overflowed (OverflowError)
    ("alpha-subnormal", ["--alpha", "1e-320"], "--alpha 1e-320: use a number from 0.0001 up to 1", False),
    ("alpha-tiny", ["--alpha", "1e-9"], "--alpha 1e-09: use a number from 0.0001 up to 1 (not 1), e.g. 0.05",
     False),
    ("alpha-one", ["--alpha", "1"], "--alpha 1.0: use a number from 0.0001 up to 1 (not 1)", False),
    ("resamples-too-many", ["--resamples", "1000001"], "--resamples 1000001: use 100 to 1,000,000", False),
    ("resamples-too-few", ["--resamples", "10"], "--resamples 10: use 100 to 1,000,000", False),
    ("json-under-a-file", ["--json", "{file}/cmp.json"], "afile is a file, not a folder", False),
    ("report-under-a-file", ["--report", "{file}/report"], "afile is a file, not a folder", False),
    ("report-is-a-file", ["--report", "{file}"], "afile is a file, not a folder", False),
    ("json-is-a-folder", ["--json", "{tmp}"], "is a folder; fix: name a file", False),
    ("json-in-proc", ["--json", "/proc/ragbench/cmp.json"], "--json /proc/ragbench/cmp.json: cannot write", False),
    ("report-in-proc", ["--report", "/proc/ragbench-report"], "--report /proc/ragbench-report: cannot write", False),
    ("baseline-under-a-file", ["--save-baseline", "{file}/b.json"], "afile is a file, not a folder", False),
]


@pytest.mark.parametrize(("args", "phrase", "read"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_option_or_output_is_one_line(store, tmp_path, capsys, args, phrase, read):
    afile = _under_a_file(tmp_path)
    argv = [a.format(file=afile, tmp=tmp_path) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragbench.compare: error: ") and len(err.strip().splitlines()) == 1, err
    assert phrase in err and "Traceback" not in err, err
    assert bool(store) == read  # refused before any run was read


def test_outputs_are_written_in_new_folders(store, tmp_path, capsys):
    assert main(["--json", f"{tmp_path}/a/b/cmp.json", "--save-baseline", f"{tmp_path}/c/base.json"]) == 0
    assert (tmp_path / "a/b/cmp.json").is_file() and (tmp_path / "c/base.json").is_file()


def test_a_write_failing_after_the_analysis_is_one_line(store, tmp_path, capsys, monkeypatch):
    import errno

    from ragbench.compare import report

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(report, "write_json", full)
    assert main(["--json", f"{tmp_path}/cmp.json"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"ragbench.compare: error: cannot write --json {tmp_path}/cmp.json (No space left on "
                           "device); fix: give it a path in a writable folder with free space")


def test_ctrl_c_is_one_line_and_exit_130(store, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(select, "find_runs", interrupted)
    assert main([]) == 130
    err = capsys.readouterr().err
    assert err == "ragbench.compare: interrupted; rerun the command\n"


def _runs(*ids: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(info=SimpleNamespace(run_id=i, run_name=f"#{n} job")) for n, i in enumerate(ids)]


@pytest.mark.parametrize(("prefix", "outcome"), [
    ("1f2e3d", "1f2e3d4c5b6a"),
    ("1f2e3d4c", "1f2e3d4c5b6a"),
    ("abcdef", "the prefix 'abcdef' matches 2 runs (abcdef01 (#1 job), abcdef02 (#2 job)); give more characters"),
    ("1f2e", "'1f2e' is too short to name a run; give at least 6 characters"),
    ("999999", "no run '999999' in sqlite:///x.db"),
], ids=["unique", "longer", "ambiguous", "too-short", "none"])
def test_run_id_prefixes(prefix, outcome):
    runs = _runs("1f2e3d4c5b6a", "abcdef01", "abcdef02")
    if outcome.startswith("1f2e"):
        assert select.by_prefix(prefix, runs, "sqlite:///x.db").info.run_id == outcome
        return
    with pytest.raises(ConfigError) as info:
        select.by_prefix(prefix, runs, "sqlite:///x.db")
    assert outcome in str(info.value) and str(info.value).startswith("--runs: ")
