"""``retrieval=run_file``: a run file that is not UTF-8 is one RunFileError naming the file, the byte's
offset and line, and the fix (it was a UnicodeDecodeError traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragbench.retrieval.run_file import RunFileError, read_run


def test_a_run_file_that_is_not_utf8_is_one_named_line(tmp_path: Path) -> None:
    path = tmp_path / "run.txt"
    path.write_bytes(b"q1 Q0 a 1 2.0 x\nq1 Q0 caf\xe9 2 1.0 x\n")
    with pytest.raises(RunFileError) as err:
        read_run(path)
    message = str(err.value)
    assert message == (f"run file {path} is not UTF-8 (byte 0xe9 at offset 25, line 2); fix: write it as "
                       "UTF-8 (iconv -t utf-8)")
