"""The settings ``python -m ragbench.export --responses`` writes into each record, and the config resolver
that reads them back, so a responses file reproduces its run without the run's top-k passed again.

Each exported record carries ``metadata.ragbench_export = {"run_id": ..., "topk": ...}``. conf/retrieval/
system.yaml sets ``topk: ${exported_topk:${oc.select:system.path,null},5}``: the run's top-k when
``system.path`` names such a file (its first record says), else 5. A ``retrieval.topk=`` override still
wins. A leaf (``ragbench/__init__`` registers the resolver, so every config composed anywhere sees it):
a file that is missing or not a record resolves to the default, and the source names the problem when
it reads the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragbench.jsonio import loads_bounded

KEY = "ragbench_export"  # the records' metadata key
FIRST_LINE_BYTES = 16_000_000  # read at most this much of the first record (system.max_record_chars)


def export_metadata(run_id: str, topk: int | None) -> dict[str, Any]:
    """What an exported record's ``metadata`` holds about the run it came from."""
    return {KEY: {"run_id": run_id, **({"topk": int(topk)} if topk else {})}}


def exported_topk(path: Any, default: Any) -> Any:
    """``retrieval.topk`` for ``system=responses``: the top-k of the run the file was exported from (its
    first record's ``metadata.ragbench_export.topk``), else ``default``."""
    if not path:
        return default
    try:
        with Path(str(path)).expanduser().open("rb") as fh:
            line = b""
            while not line.strip():
                line = fh.readline(FIRST_LINE_BYTES)
                if not line:
                    return default
        record = loads_bounded(line.decode("utf-8"))
        topk = record["metadata"][KEY]["topk"]
    except (OSError, ValueError, KeyError, TypeError):  # not a file, not JSON, not an export: the default
        return default
    return topk if isinstance(topk, int) and not isinstance(topk, bool) and topk >= 1 else default
